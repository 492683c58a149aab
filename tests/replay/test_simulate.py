"""The run loop: conservation, determinism, parity with direct decide() calls, hand-computed runs."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from autoscaler.policy.decide import decide, record_rescale
from autoscaler.policy.spec import ColdStartSpec
from autoscaler.policy.state import PolicyState
from replay import report
from replay.cli import run_policy
from replay.policies import METRIC, DecidePolicy, PolicyParams, StaticPolicy, build_policy
from replay.profiles import REFERENCE_70B, SCENARIOS, Scenario
from replay.simulate import RunResult, simulate
from replay.trace import Trace

# small replicas that load in 14 s, a short scale-down window: a 25-minute trace sees scale-ups,
# drains and scale-downs in well under a second of wall time
FAST = replace(
    REFERENCE_70B,
    name="fast",
    cold_start=ColdStartSpec(
        weights_gb=14.0,
        storage_gbps=10.0,
        image_pull_s=5.0,
        warmup_s=5.0,
        node_provision_s=20.0,
        gpus_per_replica=4,
        gpus_per_node=8,
    ),
    node_idle_remove_s=120.0,
)
PARAMS = PolicyParams(target=8.0, downscale_window_s=60)


@cache
def ramp_trace(seed: int = 5) -> Trace:
    """3 req/s, then 12 req/s for 5 minutes, then 3 req/s again: every policy scales both ways."""
    rng = np.random.default_rng(seed)
    parts = [
        rng.uniform(a, b, int((b - a) * rate)) for a, b, rate in ((0, 300, 3), (300, 600, 12), (600, 1500, 3))
    ]
    arrival = np.sort(np.concatenate(parts))
    n = len(arrival)
    return Trace("ramp", arrival - arrival[0], rng.integers(50, 3_000, n), rng.integers(5, 400, n))


@cache
def run(policy: str, scenario: Scenario = FAST) -> RunResult:
    return run_policy(ramp_trace(), scenario, policy, PARAMS)


@pytest.mark.parametrize(
    "policy", ["static-3", "hpa", "keda", "keda-cached", "kpa", "planner", "predictive", "clairvoyant"]
)
def test_every_request_finishes_exactly_once(policy: str) -> None:
    result = run(policy)
    req = result.requests
    n = len(ramp_trace())
    assert not req.dropped.any()
    assert np.isfinite(req.finished_s).all(), "a request was lost"
    assert (req.replica >= 0).all()
    arrival = result.arrival_s
    assert (req.admitted_s >= arrival - 1e-9).all()
    assert (req.first_token_s > req.admitted_s).all()
    assert (req.finished_s >= req.first_token_s - 1e-9).all()
    summary = report.policy_summary(result)
    assert summary["requests_total"] == summary["requests_finished"] == n
    assert summary["requests_dropped"] == 0


@pytest.mark.parametrize("policy", ["hpa", "kpa"])
def test_scale_down_drains_replicas_that_still_had_requests(policy: str) -> None:
    result = run(policy)
    drained = [r for r in result.replicas if np.isfinite(r.drain_s)]
    assert drained, "the ramp should make the policy scale down"
    req = result.requests
    served_after_drain = sum(
        int(np.count_nonzero((req.replica == r.id) & (req.finished_s > r.drain_s))) for r in drained
    )
    assert served_after_drain > 0  # in-flight work on draining replicas finished there
    for r in drained:
        last = req.finished_s[req.replica == r.id].max(initial=r.drain_s)
        assert r.deleted_s >= last - 1e-9  # deleted only once its last request finished


def test_same_seed_same_report() -> None:
    first = report.build_report(ramp_trace(), [run_policy(ramp_trace(), FAST, "hpa", PARAMS)], seed=5)
    second = report.build_report(ramp_trace(), [run_policy(ramp_trace(), FAST, "hpa", PARAMS)], seed=5)
    for doc in (first, second):
        for key in ("wall_seconds", "simulated_requests_per_second", "simulated_seconds_per_wall_second"):
            doc.pop(key)
        for p in doc["policies"].values():
            p.pop("wall_seconds")
            p.pop("simulated_requests_per_second")
    assert report.to_json(first) == report.to_json(second)


@pytest.mark.parametrize("policy", ["hpa", "predictive"])
def test_policy_decides_in_replay_as_when_called_directly(policy: str) -> None:
    trace = ramp_trace()
    built = build_policy(policy, FAST, trace, PARAMS, lambda: 0.0)
    assert isinstance(built, DecidePolicy)
    result = simulate(trace, FAST, built)
    assert len(built.decisions) == len(result.timeline) > 50
    # the same observations, fed straight to the controller's code with a fresh state
    state = PolicyState()
    for (now, obs, in_replay), point in zip(built.decisions, result.timeline, strict=True):
        at = built.epoch_s + now
        assert all(at - 1e-6 <= ready_at for ready_at in obs.starting_ready_at)  # on decide's clock
        direct, state = decide(built.spec, state, obs, at)
        if direct.desired_replicas != direct.current_replicas:
            state = record_rescale(built.spec, state, at, direct.current_replicas, direct.desired_replicas)
        assert direct == in_replay
        assert point.desired == direct.desired_replicas
    assert len({p.desired for p in result.timeline}) > 1  # it did scale


def test_only_policies_that_predict_get_the_start_up_projections() -> None:
    """The reactive HPA's decide() never reads them, so the loop does not run the start-up machine
    for it; the predictive policy sees the cluster's lead time and the starting replicas."""
    trace = ramp_trace()
    seen = {}
    for name in ("hpa", "predictive"):
        built = build_policy(name, FAST, trace, PARAMS, lambda: 0.0)
        assert isinstance(built, DecidePolicy)
        simulate(trace, FAST, built)
        seen[name] = [obs for _, obs, _ in built.decisions]
    assert all(obs.lead_time_s is None and obs.starting_ready_at == () for obs in seen["hpa"])
    assert all(obs.lead_time_s is not None and obs.lead_time_s > 0 for obs in seen["predictive"])
    assert any(obs.starting_ready_at for obs in seen["predictive"])


def test_one_request_through_the_whole_loop() -> None:
    trace = Trace("one", np.array([3.2]), np.array([1_600]), np.array([50]))
    result = simulate(trace, REFERENCE_70B, StaticPolicy(1))
    e = REFERENCE_70B.engine
    ttft = e.step_s(1_600, 1_600 * 1_601 // 2, 0, 0)  # one step prefills it and gives its first token
    decode = sum(e.step_s(0, 0, 1, 1_600 + g) for g in range(1, 50))
    assert result.requests.first_token_s[0] - 3.2 == pytest.approx(ttft)
    assert result.requests.finished_s[0] - 3.2 == pytest.approx(ttft + decode)
    summary = report.policy_summary(result)
    assert summary["slo_attainment"] == 1.0
    assert summary["cold_starts"] == 0 and summary["scale_events"] == 0


def test_static_fleet_costs_its_gpus_for_the_whole_run() -> None:
    result = run("static-3")
    assert result.gpu_seconds == pytest.approx(3 * 4 * result.end_s)
    assert result.scale_events == 0 and result.cold_starts == 0


@pytest.mark.parametrize("path", ["direct", "prometheus"])
def test_scrapes_run_through_in_one_engine_call_change_nothing(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop runs the engines through the scrapes before the next decision in one call when
    the fleet is calm; with that turned off (every interval ends at its scrape) the run is the
    same to the last bit: per-request times, decisions and the report."""
    from replay.fleet import Fleet
    from replay.metrics import MetricsSpec

    scenario = replace(FAST, metrics=MetricsSpec(path=path))  # type: ignore[arg-type]
    results = {}
    for merged in (True, False):
        if not merged:  # a load "in progress" all the time: no interval is run through
            monkeypatch.setattr(Fleet, "loading", property(lambda self: True))
        r = run_policy(ramp_trace(), scenario, "hpa", PARAMS)
        results[merged] = r
    a, b = results[True], results[False]
    for name in ("replica", "admitted_s", "first_token_s", "finished_s", "preemptions"):
        np.testing.assert_array_equal(getattr(a.requests, name), getattr(b.requests, name))
    seen = [[(t, repr(obs), d) for t, obs, d in r.decisions] for r in (a, b)]
    assert seen[0] == seen[1]
    assert a.timeline == b.timeline and a.end_s == b.end_s and a.gpu_seconds == b.gpu_seconds
    assert len({d.desired for d in a.timeline}) > 2  # the fleet did scale


def test_policy_sees_metrics_of_the_last_scrape() -> None:
    trace = ramp_trace()
    policy = build_policy("hpa", FAST, trace, PARAMS, lambda: 0.0)
    assert isinstance(policy, DecidePolicy)
    simulate(trace, FAST, policy)
    # the adapter's 5 s rounds, mid-way between the 15 s syncs: every reading is 2.5 s old
    ages = [obs.metrics[METRIC].age_s for _, obs, _ in policy.decisions[1:]]
    assert ages == pytest.approx([2.5] * len(ages))
    assert policy.decisions[0][1].metrics[METRIC].values_milli is None  # no round before t = 2.5 s


def test_report_files_follow_the_schema(tmp_path: Path) -> None:
    doc = report.build_report(ramp_trace(), [run("hpa"), run("static-3")], seed=5)
    written = report.write_report(tmp_path, doc)
    assert {p.name for p in written} == {
        "report.json",
        "report.md",
        "report.html",
        "timeline.png",
        "frontier.png",
    }
    loaded = json.loads((tmp_path / "report.json").read_text())
    assert loaded["schema"] == report.SCHEMA
    for key in ("wall_seconds", "simulated_requests_per_second"):
        assert loaded[key] > 0
    required = {
        "slo_attainment",
        "ttft_p50_s",
        "ttft_p95_s",
        "ttft_p99_s",
        "queue_wait_p99_s",
        "gpu_hours",
        "scale_events",
        "cold_starts",
        "requests_total",
        "requests_dropped",
        "timeline",
        "replicas",
    }
    for name in ("hpa", "static-3"):
        assert required <= loaded["policies"][name].keys()
    assert "| hpa |" in (tmp_path / "report.md").read_text()


def _write_azure(path: Path, rows: int) -> Path:
    rng = np.random.default_rng(11)
    seconds = np.sort(rng.uniform(0, 300, rows))
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for s, i, o in zip(seconds, rng.integers(10, 3_000, rows), rng.integers(5, 300, rows), strict=True):
        minute, sec = divmod(float(s), 60.0)
        lines.append(f"2023-11-16 18:{int(minute):02d}:{sec:010.7f},{i},{o}")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_cli_compare_writes_the_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from infscale.cli import main

    trace = _write_azure(tmp_path / "trace.csv", 600)
    out = tmp_path / "out"
    code = main(
        [
            "replay",
            "compare",
            "--trace",
            str(trace),
            "--format",
            "azure",
            "--policies",
            "static-2,hpa",
            "--out",
            str(out),
            "--no-plots",
            "--quiet",
        ]
    )
    assert code == 0
    doc = json.loads((out / "report.json").read_text())
    assert list(doc["policies"]) == ["static-2", "hpa"]
    assert doc["trace"]["requests"] == 600
    assert doc["policies"]["hpa"]["requests_finished"] == 600
    assert "| static-2 |" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--policies", "hpa,nope"], "unknown policy 'nope'", id="unknown policy"),
        pytest.param(
            ["--format", "azure"], "--format/--trace-option need --trace", id="format without trace"
        ),
        pytest.param(["--scenario", "missing.yaml"], "scenario 'missing.yaml'", id="unknown scenario"),
        pytest.param(["--policies", "static-x"], "static-N with N an integer", id="static without N"),
        pytest.param(["--policies", "hpa,kpa,hpa"], "--policies: hpa listed twice", id="policy twice"),
        # every policy sizes its warm start by the target: not only the ones that build an HPA spec
        pytest.param(
            ["--policies", "kpa", "--target", "0"],
            "target must be a finite number > 0, got 0.0",
            id="kpa target 0",
        ),
        pytest.param(
            ["--policies", "static,clairvoyant", "--target", "-3"],
            "target must be a finite number > 0, got -3.0",
            id="negative target",
        ),
        pytest.param(
            ["--policies", "static", "--static-replicas", "0"],
            "static: replicas must be >= 1, got 0",
            id="static with no replica (0 used to read as unset)",
        ),
        pytest.param(["--policies", "static-0"], "static: replicas must be >= 1, got 0", id="static-0"),
    ],
)
def test_cli_rejects_bad_input_naming_it(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from infscale.cli import main

    assert main(["replay", "compare", "--end-s", "60", "--no-plots", "--quiet", *argv]) == 2
    assert message in capsys.readouterr().err


def test_sweep_finds_the_cheapest_configuration_meeting_the_slo(tmp_path: Path) -> None:
    from replay.cli import parse_grid, sweep

    grid = parse_grid(["target=4,8,64", "warm_floor=0,2"])
    assert len(grid) == 6
    points = sweep(ramp_trace(), FAST, "hpa", PARAMS, grid, workers=2)
    assert [p["params"] for p in points] == grid
    front = report.pareto_front(points)
    costs = [p["gpu_hours"] for p in front]
    assert costs == sorted(costs)
    assert [p["slo_attainment"] for p in front] == sorted(p["slo_attainment"] for p in front)
    # a target of 64 in flight per replica is the cheapest and the worst
    by_target = {p["params"]["target"]: p for p in points if p["params"]["warm_floor"] == 0}
    assert by_target[64.0]["gpu_hours"] < by_target[4.0]["gpu_hours"]
    assert by_target[64.0]["slo_attainment"] < by_target[4.0]["slo_attainment"]


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        pytest.param(
            ["target=8,16", "warm_floor="], "--grid 'warm_floor=': give at least one value", id="no value"
        ),
        pytest.param(["speed=1"], "--grid 'speed=1': expected PARAM=V1,V2", id="unknown parameter"),
        pytest.param(["target=fast"], "--grid target: cannot read 'fast'", id="not a number"),
        pytest.param(["scale_to_zero=maybe"], "--grid scale_to_zero: cannot read 'maybe'", id="not a bool"),
        pytest.param([], "sweep: give at least one --grid", id="no grid"),
    ],
)
def test_bad_grid_is_an_error_naming_it(grid: list[str], message: str) -> None:
    from replay.sweep import SweepError, parse_grid

    with pytest.raises(SweepError, match=re.escape(message)):
        parse_grid(grid)


@pytest.mark.parametrize(
    "params",
    [
        pytest.param(
            PolicyParams(target=12.0, tolerance=0.2, downscale_window_s=120, warm_floor=3), id="model horizon"
        ),
        pytest.param(PolicyParams(lead_quantile=0.9), id="observed quantile horizon"),
        pytest.param(PolicyParams(lead_time_s=240.0), id="fixed lead time"),
    ],
)
@pytest.mark.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))
def test_printed_settings_are_an_inference_autoscaler_the_controller_accepts(
    params: PolicyParams, scenario: Scenario
) -> None:
    import yaml

    from autoscaler.controller.crd import parse_autoscaler
    from replay.policies import predictive_spec
    from replay.sweepwinner import settings_yaml

    text = settings_yaml(scenario, params)
    # the replay's least-loaded router is printed, and said to be the replay's (a Service is Random)
    assert "# capacity.router: LeastRequests is the replay's router" in text
    doc = yaml.safe_load(text)
    assert doc["spec"]["capacity"]["router"] == "LeastRequests"
    assert "# capacity.demand.arrivalRateMetric: a gateway's arrivals counter" in text
    assert doc["spec"]["capacity"]["demand"]["arrivalRateMetric"] == "infscale_arrival_rate"
    doc["spec"]["scaleTargetRef"] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama"}
    parsed = parse_autoscaler(doc, tolerance=0.1, downscale_stabilization_s=300, max_metric_age_s=None).spec
    replayed = predictive_spec(scenario, params)
    assert [(m.name, m.target_milli) for m in parsed.metrics] == [
        (m.name, m.target_milli) for m in replayed.metrics
    ]
    assert parsed.tolerances == replayed.tolerances
    assert parsed.behavior is not None and replayed.behavior is not None
    assert parsed.behavior.scale_up.policies == replayed.behavior.scale_up.policies
    down = parsed.behavior.scale_down.stabilization_window_s
    assert down == replayed.behavior.scale_down.stabilization_window_s
    assert parsed.cold_start == replayed.cold_start
    assert parsed.capacity == replayed.capacity  # the predictive stages run on the same profile and SLO
    if params.lead_time_s is not None:
        assert parsed.prediction is not None and replayed.prediction is not None
        assert parsed.prediction.lead_time_s == replayed.prediction.lead_time_s
    assert parsed.floors == replayed.floors
    assert (parsed.min_replicas, parsed.max_replicas) == (replayed.min_replicas, replayed.max_replicas)


def test_printed_hpa_is_a_complete_valid_autoscaling_v2_object() -> None:
    import kubernetes_validate
    import yaml

    from replay.sweepwinner import TargetRef, hpa_yaml, match_selector

    text = hpa_yaml(
        REFERENCE_70B,
        PolicyParams(target=12.0, tolerance=0.05),
        TargetRef.parse("statefulset/llama-70b"),
        match_selector("deployment=llama-70b,tier in (gold,silver),!canary"),
    )
    hpa = yaml.safe_load(text)
    kubernetes_validate.validate(hpa, "1.37", strict=True)
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "llama-70b"}
    assert spec["metrics"][0]["external"]["metric"]["selector"] == {
        "matchLabels": {"deployment": "llama-70b"},
        "matchExpressions": [
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
        ],
    }
    assert spec["metrics"][0]["external"]["target"]["averageValue"] == "12"
    assert spec["behavior"]["scaleUp"]["tolerance"] == 0.05
    # without --target-ref: a placeholder the schema accepts, and the selector still narrows
    default = yaml.safe_load(
        hpa_yaml(REFERENCE_70B, PolicyParams(), TargetRef.parse(None), match_selector("deployment=my-llm"))
    )
    kubernetes_validate.validate(default, "1.37", strict=True)
    assert "# set with --target-ref" in hpa_yaml(
        REFERENCE_70B, PolicyParams(), TargetRef.parse(None), {"matchLabels": {"a": "b"}}
    )


@pytest.mark.parametrize(
    ("ref", "selector", "message"),
    [
        pytest.param("llama", "a=b", "--target-ref 'llama': expected KIND/NAME", id="no kind"),
        pytest.param("Pod/llama", "a=b", "KIND one of Deployment, StatefulSet, ReplicaSet", id="bad kind"),
        pytest.param("Deployment/Bad_Name!", "a=b", "is not a valid object name", id="bad name"),
        pytest.param("Deployment/x", "a in (", "--selector 'a in ('", id="bad selector"),
        pytest.param("Deployment/x", "a>3", "cannot be written as a LabelSelector", id="gt"),
    ],
)
def test_bad_target_ref_or_selector_names_it(ref: str, selector: str, message: str) -> None:
    from replay.sweepwinner import SweepError, TargetRef, match_selector

    with pytest.raises(SweepError, match=re.escape(message)):
        TargetRef.parse(ref)
        match_selector(selector)


def test_edge_of_grid_warning() -> None:
    from replay.sweep import edge_warnings, grid_axes

    axes = grid_axes(["target=4,8,16", "warm_floor=0,2", "forecaster=holt,linear", "tolerance=0.1"])
    lines = edge_warnings(axes, {"target": 16.0, "warm_floor": 0, "forecaster": "holt", "tolerance": 0.1})
    assert lines == [
        "warning: the winner's target=16 is the highest value of the grid (4, 8, 16): the optimum may lie"
        " beyond it; extend --grid target",
        "warning: the winner's warm_floor=0 is the lowest value of the grid (0, 2): the optimum may lie"
        " beyond it; extend --grid warm_floor",
    ]
    assert edge_warnings(axes, {"target": 8.0, "warm_floor": 2}) == [
        "warning: the winner's warm_floor=2 is the highest value of the grid (0, 2): the optimum may lie"
        " beyond it; extend --grid warm_floor"
    ]


def test_lead_quantile_uses_the_start_ups_seen_so_far() -> None:
    trace = ramp_trace()
    policy = build_policy("predictive", FAST, trace, replace(PARAMS, lead_quantile=0.9), lambda: 0.0)
    assert isinstance(policy, DecidePolicy)
    result = simulate(trace, FAST, policy)
    checked = 0
    cold = FAST.cold_start
    for now, obs, _ in policy.decisions:
        # scheduled -> Ready, as the controller learns start-ups from pods; a node's provisioning
        # added when one more replica would not fit on the nodes up now (the observation builder)
        seen = [r.ready_s - r.scheduled_s for r in result.replicas if r.cold and r.ready_s <= now]
        if len(seen) >= 3:
            room = sum(free // cold.gpus_per_replica for free in obs.free_gpus_per_node)
            wait = cold.node_provision_s if room < 1 else 0.0
            assert obs.lead_time_s == pytest.approx(float(np.quantile(seen, 0.9)) + wait)
            checked += 1
    assert checked > 10


@pytest.mark.parametrize(
    ("seconds", "expected_middle"),
    [
        # 8 s of prefill per second for 5 s, averaged over the minute: 0.67 s/s, one replica at 70 %
        pytest.param(5.0, 1, id="shorter than the prefill window"),
        # a full minute of it: ceil(8 / 0.7) = 12 replicas
        pytest.param(600.0, 12, id="longer"),
    ],
)
def test_needed_replicas_covers_prefill_work(seconds: float, expected_middle: int) -> None:
    from replay.policies import needed_replicas

    n = int(4 * seconds)  # 4 requests/s of 16,000-token prompts: 2 s of prefill each
    trace = Trace("long prompts", np.linspace(0, seconds, n), np.full(n, 16_000), np.full(n, 10))
    need = needed_replicas(trace, REFERENCE_70B, target=1_000.0)  # the in-flight target never binds
    assert len(need) >= seconds
    assert need[int(seconds / 2)] == expected_middle
    assert need.max() == expected_middle


class _NeverScales:
    """A policy that never asks for a replica: nothing is ever served."""

    name = "never"
    period_s = 15.0
    fresh_metrics = False
    metric_names = ()
    initial_replicas = 0
    lead_quantile = None

    def desired(self, now: float, obs: object) -> int:
        return 0


def test_requests_never_served_end_the_run_as_unfinished_not_good() -> None:
    trace = Trace("three", np.array([0.0, 1.0, 2.0]), np.array([100, 100, 100]), np.array([10, 10, 10]))
    result = simulate(trace, FAST, _NeverScales(), max_tail_s=60.0)
    assert result.unfinished == 3 and 62.0 < result.end_s <= 62.0 + 15.0
    assert (result.requests.replica == -1).all()  # they waited at the gateway
    summary = report.policy_summary(result)
    assert (summary["requests_unfinished"], summary["requests_finished"], summary["slo_attainment"]) == (
        3,
        0,
        0.0,
    )


# a prompt near the KV budget beside two long decodes, prefix caching off: it is preempted and
# re-prefilled over and over (tests/replay/test_engine.py's thrash case), the decodes crawling
THRASH = replace(
    REFERENCE_70B,
    name="thrash",
    engine=replace(
        REFERENCE_70B.engine,
        max_num_seqs=64,
        max_num_batched_tokens=512,
        kv_budget_tokens=4_096,
        prefix_caching=False,
        step_base_s=0.01,
        prefill_token_s=1e-4,
        prefill_attention_s=0.0,
        decode_request_s=0.0,
        decode_context_s=0.0,
    ),
)
THRASH_TRACE = Trace(
    "thrash",
    np.array([0.0, 0.0, 1.0, 1.5]),
    np.array([1_000, 1_000, 3_584, 100_000]),
    np.array([600, 600, 1, 1]),
)


def test_a_livelocked_fleet_ends_with_a_report_counting_the_unfinished_requests() -> None:
    cut = simulate(THRASH_TRACE, THRASH, StaticPolicy(1), max_tail_s=5.0)
    whole = simulate(THRASH_TRACE, THRASH, StaticPolicy(1))  # the same run, left to end
    assert whole.unfinished == 0 and whole.requests.preemptions[2] > 100 and whole.end_s > 20.0
    assert cut.unfinished == 3 and cut.end_s < 10.0  # the three served ones; the 100k prompt is dropped
    assert np.isnan(cut.requests.finished_s[:3]).all()
    summary = report.policy_summary(cut)
    assert summary["requests_unfinished"] == 3 and summary["requests_dropped"] == 1
    assert summary["requests_total"] == summary["requests_finished"] + 1 + 3
    assert summary["slo_attainment"] == 0.0  # unfinished: not good
    assert report.policy_summary(whole)["requests_unfinished"] == 0
    doc = report.build_report(THRASH_TRACE, [cut], seed=None)
    assert "**static-1: 3 requests unfinished** when the run was cut" in report.markdown(doc)
    assert json.loads(report.to_json(doc))["policies"]["static-1"]["requests_unfinished"] == 3


def test_a_cut_run_prints_a_warning_naming_the_policy_and_the_count(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import functools

    import replay.cli

    monkeypatch.setattr(replay.cli, "simulate", functools.partial(simulate, max_tail_s=5.0))
    result = run_policy(THRASH_TRACE, THRASH, "static-1", PARAMS)
    assert result.unfinished == 3
    assert capsys.readouterr().err.splitlines() == [
        "infscale replay: warning: policy static-1: 3 requests unfinished 5 s after the trace ended; "
        f"the run was cut at {result.end_s:,.0f} s and they count as not good (requests_unfinished in "
        "report.json)"
    ]
