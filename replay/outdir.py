"""The output directory of a command that writes (`--out DIR`), checked before any work starts.

A 20-minute replay that ends in a traceback because `--out` names a file, or a directory the user
cannot write, has wasted the 20 minutes. Every command that writes calls `check_out_dir` first:

    out = check_out_dir(args.out, files=("report.json", "report.md"))   # OutDirError names the problem

and `write_error` turns an OSError of the final writes (disk full, the directory removed meanwhile)
into the same kind of one-line message. Nothing is created by the check: a command refused for
another reason leaves no empty directory behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path


class OutDirError(ValueError):
    """`--out` cannot hold the command's output; the message names the path and the reason."""


def check_out_dir(path: Path | str, *, files: Sequence[str] = (), flag: str = "--out") -> Path:
    """`path` as a Path if it is, or can be created as, a directory this process can write, and
    each of `files` inside it can be (over)written; OutDirError otherwise.

    Writability is probed (a temporary file or directory, removed at once) rather than read from
    the mode bits: root ignores them, and a read-only mount or a full quota shows only in a write.
    """
    out = Path(path)
    where = f"{flag} {out}"
    if out.exists():
        if not out.is_dir():
            raise OutDirError(f"{where}: is a file, not a directory")
        _probe(out, where, as_directory=False)
        for name in files:
            target = out / name
            if target.is_dir():
                raise OutDirError(f"{where}: {target} is a directory, expected to write a file there")
            if target.exists() and not os.access(target, os.W_OK):
                raise OutDirError(f"{where}: {target} exists and is not writable")
        return out
    ancestor = out.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutDirError(f"{where}: cannot create it, {ancestor} is a file, not a directory")
    _probe(ancestor, f"{where}: cannot create it in {ancestor}", as_directory=True)
    return out


def _probe(folder: Path, where: str, *, as_directory: bool) -> None:
    try:
        if as_directory:
            os.rmdir(tempfile.mkdtemp(prefix=".infscale-probe-", dir=folder))
        else:
            fd, name = tempfile.mkstemp(prefix=".infscale-probe-", dir=folder)
            os.close(fd)
            os.unlink(name)
    except OSError as exc:
        raise OutDirError(f"{where}: not writable ({exc.strerror or exc})") from None


def write_error(exc: OSError) -> str:
    """One line for an OSError while writing the output (after the work, so rare: disk full, the
    directory removed meanwhile)."""
    if exc.filename:
        return f"cannot write {exc.filename}: {exc.strerror or exc}"
    return f"cannot write the output: {exc}"
