"""Every command's --seed: a negative or non-integer seed is argparse's error naming --seed, before
any work (numpy's generators take integers >= 0 only, and a negative seed ended in numpy's
"expected non-negative integer", which named no argument)."""

from __future__ import annotations

import argparse

import pytest

from infscale.cli import COMMANDS, build_parser, main


def _commands_with_seed() -> list[str]:
    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[str]:
        found = [" ".join(path)] if any("--seed" in a.option_strings for a in parser._actions) else []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found += walk(child, (*path, name))
        return found

    return sorted({c for name in COMMANDS for c in walk(build_parser([name]), ())})


SEEDED = _commands_with_seed()


def test_the_replay_commands_are_all_found() -> None:
    expected = {"replay run", "replay compare", "replay league", "replay stationary", "replay online"}
    assert expected <= set(SEEDED)


@pytest.mark.parametrize("command", SEEDED)
@pytest.mark.parametrize(("seed", "says"), [("-1", "got -1"), ("one", "got 'one'")])
def test_a_bad_seed_is_named_before_any_work(
    capsys: pytest.CaptureFixture[str], command: str, seed: str, says: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*command.split(), "--seed", seed])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --seed: expected an integer >= 0, {says}" in err
    assert "Traceback" not in err
