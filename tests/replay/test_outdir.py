"""`--out` is checked before any work starts, in every command that writes (replay/outdir.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.outdir import OutDirError, check_out_dir, write_error


def test_a_missing_directory_in_a_writable_place_passes_and_nothing_is_created(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "out"
    assert check_out_dir(out, files=("report.json",)) == out
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind


def test_an_existing_directory_passes_and_keeps_its_contents(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("{}")
    assert check_out_dir(tmp_path, files=("report.json", "report.md")) == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda d: _file(d / "out"), "is a file, not a directory", id="out is a file"),
        pytest.param(
            lambda d: _file(d / "f") / "sub" / "out",
            "cannot create it, {d}/f is a file, not a directory",
            id="an ancestor is a file",
        ),
        pytest.param(
            lambda d: _dir(d / "out" / "report.json").parent,
            "report.json is a directory, expected to write a file there",
            id="an output file is a directory",
        ),
    ],
)
def test_unusable_out_is_refused_naming_path_and_reason(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    out = make(tmp_path)
    with pytest.raises(OutDirError) as caught:
        check_out_dir(out, files=("report.json",))
    assert str(caught.value).startswith(f"--out {out}: ")
    assert message.format(d=tmp_path) in str(caught.value)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc (a place no one can write)")
def test_an_unwritable_place_is_refused() -> None:
    # /proc refuses new entries even to root, who ignores mode bits: the probe sees what a write sees
    with pytest.raises(
        OutDirError, match=r"--out /proc/infscale-out: cannot create it in /proc: not writable"
    ):
        check_out_dir(Path("/proc/infscale-out"))
    with pytest.raises(OutDirError, match=r"--out /proc: not writable"):
        check_out_dir(Path("/proc"))


def test_write_error_names_the_file() -> None:
    exc = OSError(28, "No space left on device", "out/report.json")
    assert write_error(exc) == "cannot write out/report.json: No space left on device"


def _file(path: Path) -> Path:
    path.write_text("x")
    return path


def _dir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


# --- every command that writes checks before its work ---------------------------------------------


def _boom(*args: object, **kwargs: object) -> object:
    raise AssertionError("the work started although --out is unusable")


# each command with --out, its arguments (besides --out) and the function that does its work
WRITERS: dict[str, tuple[list[str], str]] = {
    "replay run": (["--policy", "hpa"], "replay.cli.simulate"),
    "replay compare": (["--policies", "static,hpa"], "replay.cli.simulate"),
    "replay sweep": (["--grid", "target=8,16"], "replay.sweep.sweep"),
    "replay online": (["--endpoint", "http://127.0.0.1:9/v1"], "replay.online.cli.run_online"),
    "replay calibrate": (["--online", "somewhere"], "replay.calibrate.calibrate"),
    "replay league": (["--policies", "hpa", "--startups", "none"], "replay.league.cli.league"),
}


def _commands_with_out() -> set[str]:
    """Every `infscale` command (and replay subcommand) whose parser has an --out option."""
    import argparse

    from infscale.cli import COMMANDS, build_parser

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> set[str]:
        found = {" ".join(path)} if any("--out" in a.option_strings for a in parser._actions) else set()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found |= walk(child, (*path, name))
        return found

    return set().union(*(walk(build_parser([name]), ()) for name in COMMANDS))


def test_every_command_with_out_is_checked_below() -> None:
    # a new command that writes gets its --out check tested, or this fails naming it
    assert _commands_with_out() == set(WRITERS)


@pytest.mark.parametrize(
    ("command", "argv", "patch"), [(c, a, p) for c, (a, p) in WRITERS.items()], ids=list(WRITERS)
)
def test_every_writing_command_refuses_a_file_as_out_before_any_work(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    argv: list[str],
    patch: str,
) -> None:
    from infscale.cli import main

    monkeypatch.setattr(patch, _boom)
    out = _file(tmp_path / "report")
    assert main([*command.split(), *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {out}: is a file, not a directory" in err
    assert "Traceback" not in err
