"""Quick start, command two: set up and run the whole test suite.

    python3 scripts/test.py [pytest arguments]

Creates .venv with the project and its test extras, installs Debian's mariadb-server, galera-4
and rsync where the machine can have them (root with apt-get) so the MariaDB tests have a server
binary to start and the Galera tests a cluster (the tests start their own throwaway ``mariadbd``
on loopback with its own data directory, and a three-node Galera cluster of their own, and stop
them), lints, type-checks (mypy, strict on runner/, bridge/ and actions/: the ``[tool.mypy]``
section of pyproject.toml), then runs pytest. A lint or type error fails the command before any test runs.
In CI (``CI`` set) a MariaDB or Galera test that cannot reach its server fails rather than skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import BIN, ROOT, ensure_venv, say

SERVER_BINARIES = ("mariadbd", "mysqld")
SBIN_DIRS = ("/usr/sbin", "/usr/libexec", "/usr/local/sbin")
# The Galera provider library (Debian's galera-4) and rsync, the joiners' state transfer.
GALERA_PROVIDERS = ("/usr/lib/galera/libgalera_smm.so", "/usr/lib/galera-4/libgalera_smm.so")
PACKAGES = ("mariadb-server", "mariadb-client", "galera-4", "rsync")


def have_mariadb() -> bool:
    return any(
        shutil.which(name) or any(Path(d, name).exists() for d in SBIN_DIRS) for name in SERVER_BINARIES
    )


def have_galera() -> bool:
    return any(Path(p).exists() for p in GALERA_PROVIDERS) and shutil.which("rsync") is not None


def provision_mariadb() -> None:
    if have_mariadb() and have_galera():
        return
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("apt-get") is None:
        say(
            "no MariaDB server binary, Galera provider or rsync, and no way to install them here: "
            "the MariaDB and Galera tests will skip (fail in CI)"
        )
        return
    say("installing Debian's " + ", ".join(PACKAGES) + " (for the throwaway test server and cluster)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES],
        check=True,
        env=env,
    )


def main() -> int:
    python = ensure_venv("test")
    provision_mariadb()
    for check in (["check", "."], ["format", "--check", "."]):
        say("ruff " + " ".join(check))
        lint = subprocess.run([str(BIN / "ruff"), *check], cwd=ROOT)
        if lint.returncode != 0:
            return lint.returncode
    say("mypy (strict: runner/, bridge/, actions/)")
    typed = subprocess.run([str(python), "-m", "mypy"], cwd=ROOT)
    if typed.returncode != 0:
        return typed.returncode
    say("pytest")
    return subprocess.run([str(python), "-m", "pytest", *sys.argv[1:]], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
