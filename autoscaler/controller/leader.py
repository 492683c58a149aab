"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

A candidate takes the lease when it is absent, released (empty holder) or expired, and the holder
renews it every retry period. Expiry is judged on the candidate's own clock, from when it last saw
the lease change (client-go's observedTime), never by comparing the holder's renewTime with local
time: clocks of two nodes differ. The leader steps down when it could not renew within the renew
deadline, before anyone else may take over (lease duration > renew deadline). Writes carry the
resourceVersion, so two candidates racing for an expired lease produce one winner and one 409.
`now` is always a parameter; the caller's loop owns the clock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from autoscaler.controller.kube import KubeClient, KubeError
from autoscaler.controller.kubetime import micro_time

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(
        self,
        kube: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration_s: float,
        renew_deadline_s: float,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration_s = lease_duration_s
        self.renew_deadline_s = renew_deadline_s
        self._renewed_at: float | None = None  # our clock, when our last write succeeded
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self.transitions = 0  # leadership gained, for telemetry and tests

    def leading(self, now: float) -> bool:
        return self._renewed_at is not None and now - self._renewed_at < self.renew_deadline_s

    def _lease(self, read: Mapping[str, Any] | None, spec: dict[str, Any]) -> dict[str, Any]:
        """The Lease to write; an update carries the resourceVersion of the one `read`."""
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if read is not None:
            metadata["resourceVersion"] = (read.get("metadata") or {}).get("resourceVersion")
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def _spec(self, now: float, acquire_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration_s)),
            "acquireTime": acquire_time,
            "renewTime": micro_time(now),
            "leaseTransitions": transitions,
        }

    async def tick(self, now: float) -> bool:
        """Try to acquire or renew once; returns whether we lead afterwards."""
        was_leading = self.leading(now)
        try:
            await self._try_acquire_or_renew(now)
        except KubeError as exc:  # keep leading until the renew deadline, as client-go
            log.warning("leader election: %s", exc)
        leading = self.leading(now)
        if leading and not was_leading:
            self.transitions += 1
            log.info("leader election: %s now leads %s/%s", self.identity, self.namespace, self.name)
        elif was_leading and not leading:
            log.warning("leader election: %s lost %s/%s", self.identity, self.namespace, self.name)
        return leading

    async def _try_acquire_or_renew(self, now: float) -> None:
        lease = await self.kube.get_lease(self.namespace, self.name)
        if lease is None:
            try:
                await self.kube.create_lease(
                    self.namespace, self._lease(None, self._spec(now, micro_time(now), 0))
                )
            except KubeError as exc:
                if exc.conflict:  # another candidate created it first
                    return
                raise
            self._renewed_at = now
            return
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration_s)
        if holder and holder != self.identity and now < self._observed_at + duration:
            self._renewed_at = None  # someone else holds a live lease
            return
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity and self._renewed_at is not None:
            acquire = str(spec.get("acquireTime") or micro_time(now))
        else:
            acquire, transitions = micro_time(now), transitions + (1 if holder != self.identity else 0)
        try:
            await self.kube.replace_lease(
                self.namespace, self.name, self._lease(lease, self._spec(now, acquire, transitions))
            )
        except KubeError as exc:
            if exc.conflict:  # someone wrote it since we read it: they won this round
                self._renewed_at = None
                return
            raise
        self._renewed_at = now
        self._observed, self._observed_at = (self.identity, micro_time(now)), now

    async def release(self, now: float) -> None:
        """Give the lease up on shutdown, so a standby takes over at once instead of after expiry."""
        if not self.leading(now):
            return
        self._renewed_at = None
        try:
            lease = await self.kube.get_lease(self.namespace, self.name)
        except KubeError as exc:  # shutting down: the lease then expires on its own
            log.warning("leader election: release failed: %s", exc)
            return
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        spec = lease.get("spec") or {}
        released = {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": int(spec.get("leaseTransitions") or 0),
        }
        try:
            await self.kube.replace_lease(self.namespace, self.name, self._lease(lease, released))
        except KubeError as exc:
            log.warning("leader election: release failed: %s", exc)
