"""The standalone predictive controller (`infscale controller`), one module per concern.

settings    typed configuration (flags, INFSCALE_CONTROLLER_* environment)
crd         the InferenceAutoscaler resource: spec parsing, the status document, persisted state
kube        kube-apiserver I/O through kubernetes-asyncio's ApiClient (scale, pods, nodes, HPAs,
            events, status), errors translated into one exception carrying the Status
metrics     External metric reads (the aggregated API or the adapter's URL) as MetricReadings
podfacts    pure: what a target's pods say (ready, starting, unschedulable, startup samples)
coldstarts  pure: learned cold starts (median, p90, quantile) kept across restarts
capacity    pure: free whole GPUs per node and whether k new replicas fit
leader      coordination.k8s.io Lease leader election
loop        per object per tick: read, decide(), write /scale, event, status
telemetry   /metrics and health endpoints (aiohttp)
publish     mode hpa: infscale_desired_replicas served as an External metric
cli         `infscale controller`
"""
