"""predictive reads the TTFT histogram the replay's engines publish unless told not to (the late
stage's evidence, autoscaler/policy/latefeedback.py): the names and the bounds agree. The
histogram's values against the requests' own first tokens: tests/replay/test_engine_ttft.py and
test_metrics_ttft.py; the stage on readings of it: tests/test_latefeedback.py."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from replay import cli, profiles
from replay.metrics.signals import METRICS, TTFT_BOUNDS
from replay.policies.params import PolicyParams
from replay.policies.predictive import TTFT_METRIC, predictive_spec


def test_the_predictive_spec_names_the_ttft_histogram_the_replay_serves() -> None:
    """On by default: the spec names the metric the replay's engines publish; off, none."""
    spec = predictive_spec(profiles.REFERENCE_70B, PolicyParams())
    assert spec.capacity is not None
    assert spec.capacity.demand.ttft_metric == TTFT_METRIC
    assert TTFT_METRIC in spec.capacity.metric_names
    plain = predictive_spec(profiles.REFERENCE_70B, PolicyParams(late_stage=False))
    assert plain.capacity is not None and plain.capacity.demand.ttft_metric is None
    assert TTFT_METRIC not in plain.capacity.metric_names
    metric = METRICS[TTFT_METRIC]
    # one item per bound, +Inf last, labelled as the late stage reads them (survival.buckets)
    assert [float(label["le"]) for label in metric.labels] == [*TTFT_BOUNDS, np.inf]
    # the scenario's 2 s target falls within vLLM's bounds: slow first tokens can be read
    assert any(bound <= profiles.REFERENCE_70B.slo.ttft_s for bound in TTFT_BOUNDS)


@pytest.mark.parametrize(
    ("flags", "on"), [((), True), (("--late-stage",), True), (("--no-late-stage",), False)]
)
@pytest.mark.parametrize("command", ["run", "compare", "sweep", "league"])
def test_the_command_lines_switch_the_late_stage(command: str, flags: tuple[str, ...], on: bool) -> None:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args([command, *flags])
    assert args.late_stage is on
    if command != "league":
        assert cli.policy_params(args).late_stage is on
