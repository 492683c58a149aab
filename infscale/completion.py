"""`infscale completion SHELL`: the shell completion script, from argcomplete.

    eval "$(infscale completion bash)"     # in ~/.bashrc
    eval "$(infscale completion zsh)"      # in ~/.zshrc
    infscale completion fish | source      # in ~/.config/fish/config.fish

Completion covers every command, option and choice; each tab press runs `infscale` with the line
so far, which imports only the command being completed.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "fish")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def run(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    print(shellcode(["infscale"], shell=args.shell))
    return 0
