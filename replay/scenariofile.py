"""Replay scenarios by name or from a file: a built-in of replay/profiles.py, or a YAML/JSON file.

A user file holds the same fields (units in the names); anything left out keeps the built-in
value of the scenario named by `base` (default `reference-70b`):

    base: fast-load-70b
    name: my-gated-70b
    cold_start: {max_concurrent_loads: 2, compile_cache: node}   # every ColdStartSpec field
    engine: {max_num_seqs: 256, prefix_caching: true}   # every EngineProfile field
    slo: {ttft_s: 1.0, tpot_s: 0.1}      # or a preset name: slo: mlperf-interactive
    metrics: {path: prometheus, prometheus: {scrape_interval_s: 30}}

Fields of earlier files still load where they moved (`_MOVED`): `slo_ttft_s: X` as
`slo: {ttft_s: X}` (the other SLO fields keep the base's: add `tpot_s: null` for the old TTFT-only
verdict), `scrape_interval_s` and `metric_delay_s` as `metrics.direct.scrape_interval_s` and
`metrics.direct.delay_s`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from autoscaler.policy.spec import ColdStartSpec
from replay.metrics.spec import MetricsError, MetricsSpec
from replay.profiles import REFERENCE_70B, SCENARIOS, EngineProfile, ProfileError, Scenario
from replay.slo import SLO_PRESETS, SloError, SloSpec, preset


def get_scenario(name_or_path: str) -> Scenario:
    """A built-in scenario by name, or a YAML/JSON file describing one."""
    if name_or_path in SCENARIOS:
        return SCENARIOS[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise ProfileError(
            f"scenario {name_or_path!r} is neither a built-in ({', '.join(SCENARIOS)}) nor a file"
        )
    return load_scenario(path)


def load_scenario(path: Path) -> Scenario:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ProfileError(f"{path}: not UTF-8 text: {e}") from e
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise ProfileError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {e}") from e
    if not isinstance(doc, dict):
        raise ProfileError(f"{path}: expected a mapping at the top level, got {type(doc).__name__}")
    try:
        return scenario_from_mapping(doc)
    except ProfileError as e:
        raise ProfileError(f"{path}: {e}") from e


def scenario_from_mapping(doc: Mapping[str, Any]) -> Scenario:
    base_name = doc.get("base", REFERENCE_70B.name)
    if not isinstance(base_name, str) or base_name not in SCENARIOS:
        raise ProfileError(f"base must be one of {', '.join(SCENARIOS)}, got {base_name!r}")
    base = SCENARIOS[base_name]
    top = {f.name: f for f in fields(Scenario)}
    changes: dict[str, Any] = {}
    doc = _migrated(doc)
    for key, value in doc.items():
        if key == "base":
            continue
        if key == "engine":
            changes[key] = _sub(EngineProfile, base.engine, value, "engine")
        elif key == "cold_start":
            changes[key] = _sub(ColdStartSpec, base.cold_start, value, "cold_start")
        elif key == "slo":
            changes[key] = _slo(base.slo, value)
        elif key == "metrics":
            try:
                changes[key] = _sub(MetricsSpec, base.metrics, value, "metrics")
            except MetricsError as e:
                raise ProfileError(str(e)) from e
        elif key in top:
            changes[key] = _typed(value, top[key].type, key)
        else:
            raise ProfileError(f"unknown field {key!r} (known: base, {', '.join(top)})")
    if "name" not in changes:
        changes["name"] = f"{base.name}-custom"
    return replace(base, **changes)


# fields of earlier scenario files -> where they live now
_MOVED = {
    "slo_ttft_s": ("slo", "ttft_s"),
    "scrape_interval_s": ("metrics", "direct", "scrape_interval_s"),
    "metric_delay_s": ("metrics", "direct", "delay_s"),
}


def _migrated(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Earlier files keep loading: each moved field is read as its new place (docs/replay.md)."""
    out = {k: v for k, v in doc.items() if k not in _MOVED}
    for old, (section, *path) in _MOVED.items():
        if old not in doc:
            continue
        if section in doc:
            raise ProfileError(f"give {section}.{'.'.join(path)}, not both {section} and the older {old}")
        node = out.setdefault(section, {})
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = doc[old]
    return out


def _slo(base: SloSpec, value: object) -> SloSpec:
    """`slo: mlperf-interactive`, or a mapping of SloSpec fields, optionally on a `preset`."""
    try:
        if isinstance(value, str):
            return preset(value)
        if not isinstance(value, dict):
            raise ProfileError(
                f"slo must be a preset name ({', '.join(SLO_PRESETS)}) or a mapping, got {value!r}"
            )
        if "preset" in value:
            name = value["preset"]
            if not isinstance(name, str):
                raise ProfileError(f"slo.preset must be a string, got {name!r}")
            base, value = preset(name), {k: v for k, v in value.items() if k != "preset"}
        spec: SloSpec = _sub(SloSpec, base, value, "slo")
        return spec
    except SloError as e:
        raise ProfileError(str(e)) from e


def _sub(cls: Any, base: Any, value: object, prefix: str) -> Any:
    if not isinstance(value, dict):
        raise ProfileError(f"{prefix} must be a mapping, got {value!r}")
    known = {f.name: f for f in fields(cls)}
    changes: dict[str, Any] = {}
    for key, item in value.items():
        if key not in known:
            raise ProfileError(f"unknown field {prefix}.{key} (known: {', '.join(known)})")
        current = getattr(base, key)
        if is_dataclass(current):  # a nested section, e.g. metrics.prometheus
            changes[key] = _sub(type(current), current, item, f"{prefix}.{key}")
        else:
            changes[key] = _typed(item, known[key].type, f"{prefix}.{key}")
    return replace(base, **changes)


def _typed(value: object, annotation: object, field: str) -> object:
    """Accept ints where floats are expected; refuse strings and bools where numbers are expected."""
    kind = str(annotation)
    if value is None and "None" in kind:
        return None
    if kind.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProfileError(f"{field} must be an integer, got {value!r}")
        return value
    if kind.startswith("bool"):
        if not isinstance(value, bool):
            raise ProfileError(f"{field} must be true or false, got {value!r}")
        return value
    if kind.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProfileError(f"{field} must be a number, got {value!r}")
        return float(value)
    if kind.startswith("str"):
        if not isinstance(value, str):
            raise ProfileError(f"{field} must be a string, got {value!r}")
        return value
    return value
