"""Engine profiles and scenarios as data: a scenario file's fields over its base's
(replay/scenariofile.py), and the errors that name the field, the value or the file."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from replay.profiles import REFERENCE_70B, ProfileError
from replay.scenariofile import get_scenario, scenario_from_mapping


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        pytest.param(
            ".yaml",
            "name: small\nengine: {max_num_seqs: 256, step_base_s: 0.012, prefix_caching: true}\n"
            "cold_start: {weights_gb: 16}\nslo: {ttft_s: 1}\ninitial_replicas: 3\n",
            id="yaml",
        ),
        pytest.param(
            ".json",
            '{"name": "small", "engine": {"max_num_seqs": 256, "step_base_s": 0.012, "prefix_caching": true},'
            ' "cold_start": {"weights_gb": 16}, "slo_ttft_s": 1, "initial_replicas": 3}',
            id="json",
        ),
    ],
)
def test_scenario_file_overrides_the_base(tmp_path: Path, suffix: str, text: str) -> None:
    path = tmp_path / f"scenario{suffix}"
    path.write_text(text, encoding="utf-8")
    scenario = get_scenario(str(path))
    assert scenario.name == "small"
    assert scenario.engine == replace(
        REFERENCE_70B.engine, max_num_seqs=256, step_base_s=0.012, prefix_caching=True
    )
    assert scenario.cold_start == replace(REFERENCE_70B.cold_start, weights_gb=16.0)
    assert (scenario.slo.ttft_s, scenario.initial_replicas) == (1.0, 3)
    assert scenario.max_replicas == REFERENCE_70B.max_replicas  # untouched fields keep the base's


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param(
            {"engine": {"max_num_seqs": 0}}, "engine.max_num_seqs must be >= 1, got 0", id="out of range"
        ),
        pytest.param(
            {"engine": {"max_num_seqs": 9_000}},
            "engine.max_num_batched_tokens must be >= max_num_seqs (9000)",
            id="budget below the running requests",
        ),
        pytest.param(
            {"engine": {"prefill_token_s": "fast"}},
            "engine.prefill_token_s must be a number, got 'fast'",
            id="not a number",
        ),
        pytest.param({"engine": {"kind": "trt"}}, "engine.kind must be one of vllm, sglang, tgi", id="kind"),
        pytest.param(
            {"engine": {"prefix_caching": 1}},
            "engine.prefix_caching must be true or false, got 1",
            id="not a bool",
        ),
        pytest.param({"max_replicas": True}, "max_replicas must be an integer, got True", id="bool for int"),
        pytest.param({"nope": 1}, "unknown field 'nope'", id="unknown field"),
        pytest.param({"engine": {"nope": 1}}, "unknown field engine.nope", id="unknown nested field"),
        pytest.param({"engine": [1]}, "engine must be a mapping", id="section not a mapping"),
        pytest.param(
            {"cold_start": {"gpus_per_replica": 16}},
            "cold_start.gpus_per_replica must be <= gpus_per_node (8)",
            id="cold start checked by the policy core",
        ),
        pytest.param(
            {"initial_replicas": 100}, "initial_replicas must be within [min_replicas", id="initial"
        ),
        pytest.param(
            {"slo": {"ttft_s": -1}}, "slo.ttft_s must be a finite number > 0, got -1.0", id="negative SLO"
        ),
        pytest.param({"base": "reference-8b"}, "base must be one of reference-70b", id="unknown base"),
        pytest.param(
            {"base": ["reference-70b"]},
            "base must be one of reference-70b, fast-load-70b, one-gpu-8b, got [",
            id="base a list",
        ),
    ],
)
def test_bad_scenario_names_the_field_and_value(doc: dict[str, object], message: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(message)):
        scenario_from_mapping(doc)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        pytest.param("bad.yaml", b"engine: [1, 2", "not valid YAML", id="invalid yaml"),
        pytest.param("bad.json", b"{", "not valid JSON", id="invalid json"),
        pytest.param(
            "list.yaml", b"- 1\n", "expected a mapping at the top level, got list", id="not a mapping"
        ),
        pytest.param("latin1.yaml", "name: café\n".encode("latin-1"), "not UTF-8 text", id="not UTF-8"),
    ],
)
def test_bad_scenario_file_names_the_file(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ProfileError, match=re.escape(message)) as info:
        get_scenario(str(path))
    assert str(path) in str(info.value)


def test_unknown_scenario_lists_the_built_ins() -> None:
    with pytest.raises(
        ProfileError, match="neither a built-in \\(reference-70b, fast-load-70b, one-gpu-8b\\) nor a file"
    ):
        get_scenario("reference-8b")
