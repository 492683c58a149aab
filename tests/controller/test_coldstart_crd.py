"""spec.coldStart of an InferenceAutoscaler: the start-up phases, weight tiers, caches and the load
gate, as the CRD schema stores them and the controller's parser turns them into a ColdStartSpec."""

from __future__ import annotations

import re
from typing import Any

import pytest
from controller_harness import autoscaler
from fake_validation import apply_defaults, crd_schema, validate_custom

from autoscaler.controller import crd
from autoscaler.policy.spec import ColdStartSpec, CompileCache, GateScope
from autoscaler.specsections import ColdStartModel

FULL = {
    "weightsGB": 140,
    "storageGBps": 100,
    "perLoaderGBps": 3.75,
    "localCacheGBps": 26,
    "nodeCacheGB": 3000,
    "peerGBps": 22.5,
    "imagePullSeconds": 30,
    "nodeProvisionSeconds": 90,
    "engineInitSeconds": 30,
    "compileSeconds": 55,
    "compileCachedSeconds": 18,
    "compileCache": "Cluster",
    "warmupSeconds": 5,
    "gpusPerReplica": 4,
    "maxConcurrentLoads": 2,
    "loadGateScope": "Startup",
}


def parse(cold_start: dict[str, Any]) -> ColdStartSpec:
    stored = apply_defaults(crd_schema(), autoscaler(cold_start=cold_start))
    validate_custom(stored)
    parsed = crd.parse_autoscaler(stored, tolerance=0.1, downscale_stabilization_s=300, max_metric_age_s=60)
    assert parsed.spec.cold_start is not None
    return parsed.spec.cold_start


def test_every_cold_start_field_reaches_the_spec() -> None:
    assert parse(FULL) == ColdStartSpec(
        weights_gb=140,
        storage_gbps=100,
        per_loader_gbps=3.75,
        local_cache_gbps=26,
        node_cache_gb=3000,
        peer_gbps=22.5,
        image_pull_s=30,
        node_provision_s=90,
        engine_init_s=30,
        compile_s=55,
        compile_cached_s=18,
        compile_cache=CompileCache.CLUSTER,
        warmup_s=5,
        gpus_per_replica=4,
        gpus_per_node=8,
        max_concurrent_loads=2,
        load_gate_scope=GateScope.STARTUP,
    )


def test_an_old_cold_start_keeps_its_meaning() -> None:
    # only the fields of earlier releases: no init, no compile, no cache, no gate
    spec = parse({"weightsGB": 140, "storageGBps": 10, "warmupSeconds": 30})
    assert spec == ColdStartSpec(weights_gb=140, storage_gbps=10, warmup_s=30)
    assert (spec.compile_cache, spec.load_gate_scope) == (CompileCache.NONE, GateScope.LOAD)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("compileCache", "Disk", id="unknown compile cache"),
        pytest.param("loadGateScope", "Pod", id="unknown gate scope"),
        pytest.param("nodeCacheGB", 0, id="zero capacity"),
        pytest.param("peerGBps", -1, id="negative peer speed"),
        pytest.param("engineInitSeconds", -5, id="negative init"),
        pytest.param("maxConcurrentLoads", 0, id="no slot"),
    ],
)
def test_the_schema_refuses_values_out_of_range(field: str, value: object) -> None:
    with pytest.raises(Exception) as info:
        validate_custom(apply_defaults(crd_schema(), autoscaler(cold_start={**FULL, field: value})))
    assert f"spec.coldStart.{field}" in {c["field"] for c in info.value.causes}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param(
            {"compileSeconds": 8, "compileCachedSeconds": 45},
            "compileCachedSeconds (45) exceeds compileSeconds (8)",
            id="a hit slower than a miss",
        ),
        pytest.param(
            {"localCacheGBps": None}, "nodeCacheGB needs localCacheGBps", id="capacity without a cache"
        ),
    ],
)
def test_the_parser_refuses_what_does_not_fit_together(changes: dict[str, Any], message: str) -> None:
    cold = {k: v for k, v in {**FULL, **changes}.items() if v is not None}
    stored = apply_defaults(crd_schema(), autoscaler(cold_start=cold))
    validate_custom(stored)  # each field alone is valid
    with pytest.raises(crd.SpecError, match=re.escape(f"spec.coldStart: {message}")):
        crd.parse_autoscaler(stored, tolerance=0.1, downscale_stabilization_s=300, max_metric_age_s=60)


@pytest.mark.parametrize(
    "cold_start",
    [pytest.param(FULL, id="every field"), pytest.param({"weightsGB": 16, "storageGBps": 10}, id="defaults")],
)
def test_a_spec_written_back_as_coldstart_parses_to_itself(cold_start: dict[str, Any]) -> None:
    spec = parse(cold_start)
    document = ColdStartModel.document_of(spec)
    assert ColdStartModel.model_validate(document).to_spec() == spec
    assert parse(document) == spec
    assert set(document) <= set(cold_start) | {"gpusPerNode"}  # nothing at its default is written
