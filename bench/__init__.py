"""Benchmarks (`python -m bench`). `--mypyc` on a bench's command line loads the policy core's
optional compiled build (autoscaler/compiledcore.py) before anything imports the core."""

import sys

if "--mypyc" in sys.argv:
    from bench import mypyc_core

    mypyc_core.activate()
