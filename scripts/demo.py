#!/usr/bin/env python3
"""Quick start, first command: ``python3 scripts/demo.py``.

Makes the virtual environment in .venv if it is missing (and installs eventbot into it), then
rehearses the bundled invasion example on a temporary SQLite database: the real engine, a
console in place of Discord, cues confirmed automatically, waits passing on a virtual clock.
Nothing is sent anywhere.

Extra arguments go to ``python -m bot rehearse``: ``--speed 60`` lets the waits really pass,
a minute a second; ``--cues ask`` lets you answer the GM cues; ``--json`` prints JSON lines.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# _bootstrap sits next to this file; the project is not importable until .venv exists.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import ROOT, ensure_venv, say

EXAMPLE = "examples/invasion.yaml"
# The example's aliases are the example config's: a config.yaml the user made for their own
# server (setup.md has them create it here) names other channels and roles.
EXAMPLE_CONFIG = "config.example.yaml"


def main() -> None:
    python = ensure_venv()
    command = [
        str(python),
        "-m",
        "bot",
        "rehearse",
        EXAMPLE,
        "--config",
        EXAMPLE_CONFIG,
        "--cues",
        "confirm",
        *sys.argv[1:],
    ]
    say(f"rehearsing {EXAMPLE}: nothing is sent to Discord")
    os.chdir(ROOT)
    if os.name == "nt":
        # Windows has no exec that keeps the console; run it and pass the exit code on.
        sys.exit(subprocess.call(command))
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
