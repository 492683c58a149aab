"""ServeGen's published files for one model (replay/traces/servegen.py synthesizes requests from
them): per client ("chunk"), `chunk-<id>-trace.csv` (one row per 600 s window: rate, inter-arrival
distribution and shape) and `chunk-<id>-dataset.json` (per 6-hour window, the input/output length
pmfs as Python dict literals, parsed when first needed), read from a `.tar.gz` or a folder and
validated."""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
import numpy.typing as npt

from replay.traces import bounds, columns, tabular
from replay.traces.errors import TraceError, at
from replay.traces.pmf import Pmf, parse_pmf

WINDOW_COLUMNS = ("window_start_s", "rate_rps", "cv", "distribution", "shape", "scale")
GAMMA, WEIBULL = "Gamma", "Weibull"
DEFAULT_WINDOW_S = 600.0
_MEMBER = re.compile(r"chunk-(\d+)-(trace\.csv|dataset\.json)$")

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ClientWindows:
    """One client's 600 s windows, as read from `chunk-<id>-trace.csv`."""

    client: int
    file: str
    window_s: float
    starts: Floats
    counts: Ints
    weibull: npt.NDArray[np.bool_]  # False: Gamma (meaningless where the count is 0)
    shape: Floats


@dataclass
class Dataset:
    """One client's `dataset.json`, decoded lazily: pmf strings are parsed when first needed."""

    file: str
    raw: dict[float, dict[str, object]]
    parsed: dict[tuple[float, str], Pmf | None] = field(default_factory=dict)

    def keys(self) -> Floats:
        return np.array(sorted(self.raw), dtype=np.float64)

    def pmf(self, key: float, name: str) -> Pmf | None:
        if (key, name) not in self.parsed:
            text = self.raw.get(key, {}).get(name)
            self.parsed[key, name] = (
                None if text is None else parse_pmf(text, f"{at(self.file)}window {key:g}: {name}: ")
            )
        return self.parsed[key, name]


def read_windows(text: str, file: str, client: int) -> ClientWindows:
    """Validate one `chunk-<id>-trace.csv` (no header; row 1 is the first window)."""
    table = tabular.read_csv(text, file, required=WINDOW_COLUMNS, header=WINDOW_COLUMNS)
    rows = table.rows
    starts = columns.float_column(table.columns["window_start_s"], rows, file, "window start", text=True)
    rate = columns.float_column(table.columns["rate_rps"], rows, file, "rate", text=True)
    shape = columns.float_column(table.columns["shape"], rows, file, "shape", text=True)
    steps = np.diff(starts)
    window_s = float(steps[0]) if len(steps) else DEFAULT_WINDOW_S
    uneven = (
        np.flatnonzero(np.abs(steps - window_s) > 1e-6 * window_s) if window_s > 0 else np.arange(len(steps))
    )
    if window_s <= 0 or len(uneven):
        i = int(uneven[0]) + 1 if len(uneven) else 1
        raise TraceError(
            f"{at(file, int(rows[i]), 'window start')}expected windows every {window_s:g} s "
            f"(as rows 1-2), got {starts[i]:g} after {starts[i - 1]:g}"
        )
    outside = np.flatnonzero((starts < 0) | (starts + window_s > bounds.MAX_SPAN_S))
    if len(outside):
        i = int(outside[0])
        raise TraceError(
            f"{at(file, int(rows[i]), 'window start')}{starts[i]:g} s: a window must lie within "
            f"0 .. {bounds.MAX_SPAN_S:g} s ({bounds.MAX_SPAN_S / 86_400:g} days) of the model's clock"
        )
    negative = np.flatnonzero(rate < 0)
    if len(negative):
        i = int(negative[0])
        raise TraceError(f"{at(file, int(rows[i]), 'rate')}expected a rate >= 0, got {rate[i]:g}")
    exact = rate * window_s
    counts = np.rint(exact).astype(np.int64)
    fractional = np.flatnonzero(np.abs(exact - counts) > 1e-6 * np.maximum(1.0, exact))
    if len(fractional):
        i = int(fractional[0])
        raise TraceError(
            f"{at(file, int(rows[i]), 'rate')}rate × {window_s:g} s = {exact[i]:g} requests, "
            "expected a whole number (ServeGen rates are counts per window)"
        )
    family = np.char.strip(np.array(table.columns["distribution"], dtype=np.str_))
    active = counts > 0
    unknown = np.flatnonzero(active & (family != GAMMA) & (family != WEIBULL))
    if len(unknown):
        i = int(unknown[0])
        raise TraceError(
            f"{at(file, int(rows[i]), 'distribution')}expected {GAMMA} or {WEIBULL} for a window with "
            f"{counts[i]} requests, got {str(family[i])!r}"
        )
    bad_shape = np.flatnonzero(active & ~(shape > 0))
    if len(bad_shape):
        i = int(bad_shape[0])
        raise TraceError(f"{at(file, int(rows[i]), 'shape')}expected a shape > 0, got {shape[i]:g}")
    return ClientWindows(client, file, window_s, starts, counts, family == WEIBULL, shape)


def read_dataset(data: bytes, file: str) -> Dataset:
    try:
        decoded = json.loads(tabular.decode(data, file))
    except json.JSONDecodeError as exc:
        raise TraceError(f"{at(file, exc.lineno)}not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(decoded, dict):
        raise TraceError(
            f"{file}: expected a JSON object keyed by window start, got {type(decoded).__name__}"
        )
    raw: dict[float, dict[str, object]] = {}
    for key, fields in decoded.items():
        try:
            start = float(key)
        except ValueError:
            raise TraceError(
                f"{file}: window {key!r}: expected a window start in seconds as the key"
            ) from None
        if not isinstance(fields, dict):
            raise TraceError(f"{file}: window {key}: expected an object of field → pmf string")
        raw[start] = fields
    return Dataset(file, raw)


@dataclass(frozen=True, slots=True)
class Model:
    name: str
    windows: dict[int, ClientWindows]
    datasets: dict[int, Dataset]


def read_model(path: Path) -> Model:
    traces: dict[int, tuple[str, bytes]] = {}
    datasets: dict[int, tuple[str, bytes]] = {}
    folders: set[str] = set()

    def take(name: str, read: Callable[[], bytes]) -> None:
        match = _MEMBER.search(name)
        if match is None or not (name == match.group(0) or name.endswith("/" + match.group(0))):
            return
        client, kind = int(match.group(1)), match.group(2)
        (traces if kind == "trace.csv" else datasets)[client] = (PurePosixPath(name).name, read())
        if kind == "trace.csv":
            folders.add(str(PurePosixPath(name).parent))

    if path.is_dir():
        for file in sorted(path.rglob("chunk-*-*")):
            if file.is_file():
                take(file.relative_to(path).as_posix(), file.read_bytes)
    elif path.is_file():
        try:
            with tarfile.open(path, "r:*") as archive:
                for member in archive:
                    if member.isfile():
                        handle = archive.extractfile(member)
                        if handle is not None:
                            take(member.name, handle.read)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise TraceError(f"{path.name}: not a readable .tar.gz archive or folder: {exc}") from None
    else:
        raise TraceError(f"{path}: no such file or folder")
    if not traces:
        raise TraceError(
            f"{path.name}: no chunk-<id>-trace.csv found (expected a ServeGen model folder or archive)"
        )
    if len(folders) > 1:
        raise TraceError(
            f"{path.name}: holds several models ({', '.join(sorted(folders))}); point at one model's folder"
        )
    windows = {
        client: read_windows(tabular.decode(data, name), name, client)
        for client, (name, data) in sorted(traces.items())
    }
    return Model(
        name=tabular.trace_name(path),
        windows=windows,
        datasets={client: read_dataset(data, name) for client, (name, data) in sorted(datasets.items())},
    )
