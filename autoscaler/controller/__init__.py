"""The standalone predictive controller (`infscale controller`), one module per concern.

settings    typed configuration (flags, INFSCALE_CONTROLLER_* environment)
crd         the InferenceAutoscaler resource: spec parsing, the status document, persisted state
kube        kube-apiserver I/O through kubernetes-asyncio's ApiClient (scale, pods, nodes, HPAs,
            events, status), errors translated into one exception carrying the Status
metrics     External metric reads (the aggregated API or the adapter's URL) as MetricReadings
metriccache one read per (namespace, metric) per interval, shared by every autoscaler on it
cache       informer caches (InferenceAutoscalers, targets, pods, HPAs, nodes) and their lookups
workqueue   which object to reconcile next and when (client-go's semantics, per-key backoff)
podfacts    pure: what a target's pods say (ready, starting, unschedulable, startup samples)
coldstarts  pure: learned cold starts (median, p90, quantile) kept across restarts
capacity    pure: free whole GPUs per node and whether k new replicas fit
leader      coordination.k8s.io Lease leader election
plan        pure: one reconcile, (autoscaler, snapshot, memory, now) -> (outcome, effects, memory)
report      pure: conditions, the status document, Event notes, the capacity verdict
loop        the Controller: leadership, readiness, one reconcile per key (snapshot -> plan -> effects)
snapshots   a reconcile's Snapshot from the caches and the metric reads
effects     a plan's effects performed (/scale first, Events, status patch) and its gauges
driver      run(): the real-time driver (election, metric polls, workers)
telemetry   /metrics and health endpoints (aiohttp)
publish     mode hpa: infscale_desired_replicas served as an External metric
cli         `infscale controller`
"""
