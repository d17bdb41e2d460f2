"""Shared set-up for the quick-start scripts: a virtual environment in .venv with the project
installed, made from nothing but the Python that runs this file."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def ensure_venv(extras: str = "") -> Path:
    """Create .venv if needed and (re)install the project when pyproject.toml changed."""
    if sys.version_info < (3, 11):  # noqa: UP036 - runs under whatever python3 the machine has
        sys.exit(f"eventbot needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        say(f"creating a virtual environment in {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / f".installed{('-' + extras) if extras else ''}"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        say("installing eventbot" + (f" with [{extras}]" if extras else ""))
        target = f".[{extras}]" if extras else "."
        subprocess.run([str(PYTHON), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True, cwd=ROOT)
        subprocess.run([str(PYTHON), "-m", "pip", "install", "-q", "-e", target], check=True, cwd=ROOT)
        stamp.write_text(digest)
    return PYTHON
