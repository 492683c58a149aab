"""ServeGen window data → requests: exact window counts, pmf lengths with the aggregate fallback,
filters, archives vs folders, and malformed files."""

from __future__ import annotations

import ast
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from replay.traces import TraceError, servegen
from replay.traces.pmf import parse_pmf

WINDOW = 600
# client -> (rate per window in req/s, distribution, shape); windows start at 0, 600, ... 3000
CLIENTS = {
    0: ([0.5, 0.0, 1.0, 0.25, 0.0, 0.5], "Gamma", 0.3),
    1: ([1 / 6] * 6, "Weibull", 0.5),
    2: ([1 / 3] * 6, "Gamma", 1.0),  # no dataset.json: lengths come from the aggregate
}
DATASETS = {
    0: {
        "0": {"input_tokens": "{100: 1.0}", "output_tokens": "{10: 1.0}"},
        "1800": {"input_tokens": "{150: 0.5, 160: 0.5}", "output_tokens": "{}"},
    },
    1: {
        "0": {"input_tokens": "{200: 1.0}", "output_tokens": "{20: 1.0}"},
        "1800": {"input_tokens": "{250: 1.0}", "output_tokens": "{25: 0.5, 0: 0.5}"},
    },
}


def trace_rows(rates: list[float], family: str, shape: float) -> str:
    lines = []
    for i, rate in enumerate(rates):
        fitted = f"{family},{shape},3.5" if rate > 0 else ",0,0"
        lines.append(f"{i * WINDOW},{rate},1.2,{fitted}")
    return "\n".join(lines) + "\n"


def make_model(root: Path, datasets: dict[int, dict[str, dict[str, str]]] = DATASETS) -> Path:
    model = root / "servegen" / "data" / "language" / "m-test"
    model.mkdir(parents=True)
    for client, (rates, family, shape) in CLIENTS.items():
        (model / f"chunk-{client}-trace.csv").write_text(trace_rows(rates, family, shape))
    for client, data in datasets.items():
        (model / f"chunk-{client}-dataset.json").write_text(json.dumps(data))
    return root


def test_every_window_gets_exactly_its_count_inside_it() -> None:
    counts = np.array([3, 0, 1, 500, 2], dtype=np.int64)
    starts = np.arange(5) * 600.0
    arrival, window = servegen.synthesize_arrivals(
        starts,
        np.full(5, 600.0),
        counts,
        np.array([False, False, True, True, False]),
        np.array([0.02, 1.0, 0.01, 0.7, 5.0]),
        np.random.default_rng(0),
    )
    assert np.bincount(window, minlength=5).tolist() == counts.tolist()
    assert np.isfinite(arrival).all()
    assert ((arrival >= starts[window]) & (arrival < starts[window] + 600)).all()
    assert (np.diff(arrival) >= 0).all()  # windows in order, ascending within each


@pytest.mark.parametrize(
    ("weibull", "shape", "low", "high"),
    [
        pytest.param(False, 1.0, 0.8, 1.2, id="Gamma 1 is Poisson-like"),
        pytest.param(False, 0.05, 2.5, np.inf, id="small Gamma shape is bursty"),
        pytest.param(True, 0.4, 2.0, np.inf, id="small Weibull shape is bursty"),
        pytest.param(False, 25.0, 0.0, 0.4, id="large shape is regular"),
    ],
)
def test_the_shape_sets_the_burstiness(weibull: bool, shape: float, low: float, high: float) -> None:
    arrival, _ = servegen.synthesize_arrivals(
        np.array([0.0]),
        np.array([600.0]),
        np.array([5000]),
        np.array([weibull]),
        np.array([shape]),
        np.random.default_rng(1),
    )
    gaps = np.diff(arrival)
    assert low < gaps.std() / gaps.mean() < high


def test_loads_all_clients_with_exact_total(tmp_path: Path) -> None:
    trace = servegen.load(make_model(tmp_path))
    total = sum(round(r * WINDOW) for rates, _, _ in CLIENTS.values() for r in rates)
    assert len(trace) == total == 1350 + 600 + 1200
    assert trace.arrival_s[0] == 0.0 and (np.diff(trace.arrival_s) >= 0).all()
    assert trace.duration_s < 3600
    assert trace.output_tokens.min() >= 1  # a 0 in a pmf is raised to 1


@pytest.mark.parametrize(
    ("client", "start", "end", "count", "inputs", "outputs"),
    [
        pytest.param(0, 0, 1800, 900, {100}, {10}, id="own pmf, first 6-hour-style window"),
        pytest.param(0, 1800, 3600, 450, {150, 160}, {25, 1}, id="own input, empty output falls back"),
        pytest.param(1, 1800, None, 300, {250}, {25, 1}, id="second dataset window"),
    ],
)
def test_lengths_come_from_the_clients_window_pmf(
    tmp_path: Path,
    client: int,
    start: float,
    end: float | None,
    count: int,
    inputs: set[int],
    outputs: set[int],
) -> None:
    trace = servegen.load(make_model(tmp_path), clients=(client,), start_s=start, end_s=end)
    assert len(trace) == count
    assert set(trace.input_tokens.tolist()) == inputs
    assert set(trace.output_tokens.tolist()) == outputs


def test_a_client_without_dataset_draws_from_the_request_weighted_aggregate(tmp_path: Path) -> None:
    trace = servegen.load(make_model(tmp_path), clients=(2,), start_s=0, end_s=1800, seed=4)
    assert len(trace) == 600
    assert set(trace.input_tokens.tolist()) == {100, 200}
    # in [0, 1800) client 0 sent 900 requests and client 1 sent 300: P(100) = 0.75
    assert np.mean(trace.input_tokens == 100) == pytest.approx(0.75, abs=0.06)


def test_archive_and_folder_give_the_same_trace(tmp_path: Path) -> None:
    folder = make_model(tmp_path / "x")
    archive = tmp_path / "servegen_language_m-test.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder / "servegen", arcname="servegen")
    from_folder, from_archive = servegen.load(folder, seed=3), servegen.load(archive, seed=3)
    assert from_archive.name == "servegen_language_m-test"
    for column in ("arrival_s", "input_tokens", "output_tokens"):
        assert np.array_equal(getattr(from_folder, column), getattr(from_archive, column))


def test_seeded(tmp_path: Path) -> None:
    root = make_model(tmp_path)
    a, b, c = servegen.load(root, seed=1), servegen.load(root, seed=1), servegen.load(root, seed=2)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.input_tokens, b.input_tokens)
    assert not np.array_equal(a.arrival_s, c.arrival_s)


@pytest.mark.parametrize("scale", [pytest.param(0.37, id="x0.37"), pytest.param(2.5, id="x2.5")])
def test_rate_scale_rounds_each_window_up_or_down(tmp_path: Path, scale: float) -> None:
    trace = servegen.load(make_model(tmp_path), rate_scale=scale)
    exact = [round(r * WINDOW) * scale for rates, _, _ in CLIENTS.values() for r in rates]
    assert sum(np.floor(exact)) <= len(trace) <= sum(np.ceil(exact))


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(
            {"clients": (7,)}, "clients: no chunk 7 (the model has chunks 0–2, 3 in all)", id="unknown client"
        ),
        pytest.param({"max_requests": 1000}, "about 3,150 requests in the chosen windows", id="too many"),
        pytest.param(
            {"clients": (0,), "start_s": 600, "end_s": 1200}, "no request in [600, 1200) s", id="quiet window"
        ),
        pytest.param({"rate_scale": 0.0}, "rate scale: expected a number > 0", id="zero scale"),
        pytest.param({"clients": ()}, "clients: expected at least one chunk id", id="no client"),
        pytest.param(
            {"start_s": 100, "end_s": 50}, "time window: expected 0 <= start < end", id="inverted window"
        ),
    ],
)
def test_bad_options(tmp_path: Path, options: dict[str, object], expected: str) -> None:
    with pytest.raises(TraceError) as caught:
        servegen.load(make_model(tmp_path), **options)  # type: ignore[arg-type]
    assert expected in str(caught.value), str(caught.value)


TRACE_CSV, DATASET_JSON = "chunk-0-trace.csv", "chunk-0-dataset.json"


@pytest.mark.parametrize(
    ("member", "content", "expected"),
    [
        pytest.param(
            TRACE_CSV,
            "0,0.5,1,Gamma,0.3,1\n600,0.0025,1,Gamma,0.3,1\n",
            "chunk-0-trace.csv row 2: rate: rate × 600 s = 1.5 requests, expected a whole number",
            id="fractional count",
        ),
        pytest.param(
            TRACE_CSV,
            "0,0.5,1,Pareto,0.3,1\n",
            "chunk-0-trace.csv row 1: distribution: expected Gamma or Weibull for a window with "
            "300 requests, "
            "got 'Pareto'",
            id="unknown distribution",
        ),
        pytest.param(
            TRACE_CSV,
            "0,0.5,1,Gamma,0,0\n",
            "chunk-0-trace.csv row 1: shape: expected a shape > 0, got 0",
            id="zero shape",
        ),
        pytest.param(
            TRACE_CSV,
            "0,0.5,1,Gamma,0.3,1\n600,0,0,,0,0\n1300,0,0,,0,0\n",
            "chunk-0-trace.csv row 3: window start: expected windows every 600 s",
            id="uneven windows",
        ),
        pytest.param(
            TRACE_CSV,
            "0,0.5,1,Gamma,0.3\n",
            "chunk-0-trace.csv row 1: expected 6 fields, got 5",
            id="short row",
        ),
        pytest.param(
            TRACE_CSV,
            "0,-0.5,1,Gamma,0.3,1\n",
            "chunk-0-trace.csv row 1: rate: expected a rate >= 0, got -0.5",
            id="negative rate",
        ),
        pytest.param(
            TRACE_CSV,
            "0,fast,1,Gamma,0.3,1\n",
            "chunk-0-trace.csv row 1: rate: expected a finite number, got 'fast'",
            id="rate not a number",
        ),
        pytest.param(
            DATASET_JSON,
            '{"0": {"input_tokens": "{100: 1.0",',
            "chunk-0-dataset.json row 1: not valid JSON",
            id="truncated JSON",
        ),
        pytest.param(
            DATASET_JSON,
            '{"0": {"input_tokens": "{100: oops}", "output_tokens": "{1: 1}"}}',
            "chunk-0-dataset.json: window 0: input_tokens: expected a dict literal",
            id="pmf not a literal",
        ),
        pytest.param(
            DATASET_JSON,
            '{"0": {"input_tokens": "{100: -1.0}", "output_tokens": "{1: 1}"}}',
            "chunk-0-dataset.json: window 0: input_tokens: expected non-negative probabilities",
            id="negative probability",
        ),
        pytest.param(
            DATASET_JSON,
            '{"0": {"input_tokens": "{10.5: 1.0}", "output_tokens": "{1: 1}"}}',
            "chunk-0-dataset.json: window 0: input_tokens: expected non-negative whole token counts as keys, "
            "got 10.5",
            id="fractional tokens",
        ),
        pytest.param(
            DATASET_JSON,
            '{"0": {"input_tokens": "[1, 2]", "output_tokens": "{1: 1}"}}',
            "chunk-0-dataset.json: window 0: input_tokens: expected a dict literal",
            id="a list",
        ),
        pytest.param(
            DATASET_JSON,
            '{"noon": {}}',
            "chunk-0-dataset.json: window 'noon': expected a window start in seconds",
            id="bad key",
        ),
    ],
)
def test_malformed_files_name_the_file_row_and_field(
    tmp_path: Path, member: str, content: str, expected: str
) -> None:
    root = make_model(tmp_path)
    next(root.rglob(member)).write_text(content)
    with pytest.raises(TraceError) as caught:
        servegen.load(root, clients=(0,))
    assert str(caught.value).startswith(expected), str(caught.value)


def test_not_a_model(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(TraceError, match=r"no chunk-<id>-trace\.csv found"):
        servegen.load(tmp_path)
    with pytest.raises(TraceError, match=r"not a readable \.tar\.gz archive"):
        servegen.load(tmp_path / "notes.txt")


def test_several_models_in_one_folder_are_refused(tmp_path: Path) -> None:
    make_model(tmp_path / "a")
    make_model(tmp_path / "b")
    with pytest.raises(TraceError, match="holds several models"):
        servegen.load(tmp_path)


def test_no_dataset_at_all_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"no chunk-<id>-dataset\.json"):
        servegen.load(make_model(tmp_path, datasets={}))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{45: 0.0097, 46: 0.0117, 47: 0.0039}", id="ints to floats"),
        pytest.param("{0.0: 0.0, 0.001996007984031936: 0.25, 1: 0.75}", id="float keys"),
        pytest.param("{ 3 :1e-05,4: 2.5E-3 , 5:0.99749 }", id="odd spacing and exponents"),
        pytest.param("{7: 1}", id="one entry"),
        pytest.param("{1: 0.5, 2: 0.5,}", id="trailing comma (the literal parser's path)"),
    ],
)
def test_fast_pmf_parse_agrees_with_literal_eval(text: str) -> None:
    literal = ast.literal_eval(text)
    if any(k != int(k) for k in literal):
        with pytest.raises(TraceError, match="whole token counts"):
            parse_pmf(text, "x: ")
        return
    pmf = parse_pmf(text, "x: ")
    assert pmf is not None
    total = sum(literal.values())
    assert dict(zip(pmf.values.tolist(), pmf.probabilities.tolist(), strict=True)) == pytest.approx(
        {int(k): v / total for k, v in literal.items()}
    )


def test_empty_pmf_means_no_data() -> None:
    assert parse_pmf(" {} ", "x: ") is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{1: 2: 3, 4}", id="two colons in one entry"),
        pytest.param("{1, 2}", id="a set"),
        pytest.param("{'a': 1.0}", id="string key"),
    ],
)
def test_text_that_is_not_a_numeric_dict_is_refused(text: str) -> None:
    with pytest.raises(TraceError, match=r"^x: expected"):
        parse_pmf(text, "x: ")
