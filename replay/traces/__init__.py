"""Trace formats → `Trace`: one module per format, all listed in `FORMATS`, one entry point `load_trace`.

    load_trace("azure_llm_2023_code.csv", "azure")
    load_trace("BurstGPT_1.csv", "burstgpt", model="GPT-4", start_s=0, end_s=3600, rate_scale=0.5)
    load_trace("servegen_language_m-large.tar.gz", "servegen", start_s=72000, end_s=75600, rate_scale=0.01)
    load_trace("log.csv", "csv", arrival_column="ts", input_column="prompt", output_column="completion",
               time_unit="ms")
    default_trace(seed=0)  # the embedded synthetic default

Every reader raises `TraceError` naming the file, row and field. Options arrive either typed (from
Python) or as strings (from the CLI's `--trace-option key=value`); both are checked against the
reader's signature here, once. The window (`start_s`, `end_s`) and `rate_scale` work for every
format: ServeGen applies them while synthesizing (so 14 days never materialize), the others after
loading, window first (on the trace's own clock), then the rate scale (see `transform`). So does
the option `output_scale` (every output length ×k, `outputscale`), applied to what the reader gives.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from replay.trace import Trace
from replay.traces import azure, burstgpt, generic, mooncake, servegen
from replay.traces.bounds import MAX_SPAN_S, MAX_TOKENS
from replay.traces.errors import TraceError
from replay.traces.outputscale import scale_output
from replay.traces.synthetic import Burst, SyntheticSpec, default_trace, synthetic_trace
from replay.traces.transform import scale_rate, time_window, window_and_scale

__all__ = [
    "FORMATS",
    "MAX_SPAN_S",
    "MAX_TOKENS",
    "Burst",
    "SyntheticSpec",
    "TraceError",
    "TraceFormat",
    "default_trace",
    "load_trace",
    "options_from_pairs",
    "scale_output",
    "scale_rate",
    "synthetic_trace",
    "time_window",
    "window_and_scale",
]


@dataclass(frozen=True, slots=True)
class TraceFormat:
    load: Callable[..., Trace]
    description: str
    synthesizes: bool = False  # True: the reader takes start_s, end_s, rate_scale and seed itself


FORMATS: dict[str, TraceFormat] = {
    "azure": TraceFormat(azure.load, "Azure LLM inference CSV (TIMESTAMP, ContextTokens, GeneratedTokens)"),
    "mooncake": TraceFormat(
        mooncake.load, "Mooncake JSONL (timestamp ms, input_length, output_length, hash_ids)"
    ),
    "burstgpt": TraceFormat(
        burstgpt.load, "BurstGPT CSV (Timestamp s, Model, Request/Response tokens, Log Type)"
    ),
    "servegen": TraceFormat(
        servegen.load,
        "ServeGen per-client window data (.tar.gz or folder), arrivals synthesized",
        synthesizes=True,
    ),
    "csv": TraceFormat(
        generic.load_csv, "any CSV, with arrival_column/input_column/output_column and time_unit"
    ),
    "jsonl": TraceFormat(
        generic.load_jsonl, "any JSON Lines, with arrival_column/input_column/output_column"
    ),
}


def load_trace(
    path: str | Path,
    fmt: str,
    *,
    start_s: float = 0.0,
    end_s: float | None = None,
    rate_scale: float = 1.0,
    seed: int = 0,
    **options: object,
) -> Trace:
    """Read `path` as `fmt`, keep [start_s, end_s) re-based to 0, scale the rate by `rate_scale`
    and, with the option `output_scale`, every output length."""
    if fmt not in FORMATS:
        raise TraceError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    spec = FORMATS[fmt]
    hints = _option_hints(spec.load)
    typed = {name: _coerce(fmt, name, value, hints) for name, value in options.items()}
    output_scale = typed.pop(OUTPUT_SCALE, 1.0)
    assert isinstance(output_scale, float)  # checked by _coerce
    trace = _load_window(Path(path), spec, start_s, end_s, rate_scale, seed, typed)
    return scale_output(trace, output_scale)


OUTPUT_SCALE = "output_scale"  # the one option every format takes (outputscale.py)


def _load_window(
    path: Path,
    spec: TraceFormat,
    start_s: float,
    end_s: float | None,
    rate_scale: float,
    seed: int,
    typed: dict[str, object],
) -> Trace:
    if spec.synthesizes:
        return spec.load(path, start_s=start_s, end_s=end_s, rate_scale=rate_scale, seed=seed, **typed)
    windowed = start_s != 0.0 or end_s is not None
    given = typed.get("max_span_s", MAX_SPAN_S)
    given_limit = None if given is None else float(given)  # type: ignore[arg-type]  # checked by _coerce
    if windowed:
        typed["max_span_s"] = None  # the window bounds the replay; the whole file may be longer
    trace = spec.load(path, **typed)
    trace = window_and_scale(trace, start_s=start_s, end_s=end_s, rate_scale=rate_scale, seed=seed)
    if windowed and end_s is None and given_limit is not None and trace.duration_s > given_limit:
        raise TraceError(  # only start_s was given: what follows it is held to the bound
            f"{path.name}: from start_s={start_s:g} the trace spans {trace.duration_s / 86_400:,.1f} "
            f"days, more than max_span_s ({given_limit / 86_400:g} days): give --end-s too"
        )
    return trace


# load_trace's own arguments: each has its command-line flag, and as an option it would be given twice
_ARGUMENT_FLAGS = {
    "start_s": "--start-s",
    "end_s": "--end-s",
    "rate_scale": "--rate-scale (the league's --rate-scales)",
    "seed": "--seed",
}


def options_from_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """`["time_unit=ms", "arrival_column=ts"]` → options for `load_trace` (which coerces the strings)."""
    options: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise TraceError(f"trace option: expected key=value, got {pair!r}")
        if name in _ARGUMENT_FLAGS:
            raise TraceError(f"trace option {name}: give it with {_ARGUMENT_FLAGS[name]}, not --trace-option")
        options[name] = value.strip()
    return options


def _option_hints(load: Callable[..., Trace]) -> dict[str, Any]:
    hints = typing.get_type_hints(load)
    keyword = [p.name for p in inspect.signature(load).parameters.values() if p.kind is p.KEYWORD_ONLY]
    return {name: hints[name] for name in keyword} | {OUTPUT_SCALE: float}


def _coerce(fmt: str, name: str, value: object, hints: Mapping[str, Any]) -> object:
    if name not in hints:
        accepted = ", ".join(sorted(hints)) or "none"
        raise TraceError(f"format {fmt!r}: unknown option {name!r} (accepted: {accepted})")
    try:
        return _convert(value, hints[name])
    except (TypeError, ValueError) as exc:
        raise TraceError(f"format {fmt!r}: option {name}: {exc}") from None


_TRUE, _FALSE = {"true", "yes", "1", "on"}, {"false", "no", "0", "off"}


def _convert(value: object, hint: Any) -> object:
    """Check a typed value or parse a CLI string against a reader's annotation."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        if type(None) in args and (
            value is None or (isinstance(value, str) and value.strip().lower() in {"", "none"})
        ):
            return None
        others = [a for a in args if a is not type(None)]
        return _convert(value, others[0])
    if origin is Literal:
        if value not in args:
            raise ValueError(f"expected one of {', '.join(map(str, args))}, got {value!r}")
        return value
    if origin is tuple:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            raise ValueError(f"expected a comma-separated list, got {value!r}")
        return tuple(_convert(item.strip() if isinstance(item, str) else item, args[0]) for item in items)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError(f"expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ValueError(f"expected an integer, got {value!r}")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ValueError(f"expected a number, got {value!r}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"expected a string, got {value!r}")
    raise TypeError(f"unsupported option type {hint!r}")  # a reader grew an option this table cannot read
