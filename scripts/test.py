"""Quick start, command two, for contributors: set up, lint, type-check and test.

    python3 scripts/test.py [pytest arguments]          the fast tier: every change, about 4 min
    python3 scripts/test.py --all [pytest arguments]    everything, as CI runs it (.ci/run), about 18 min

(Measured on a shared two-core machine with .venv already built: the fast tier's 1,290 tests in
4 min 10 s, lint and mypy included; --all's 1,401 in 18 min 30 s, 16 min over the cores and
2.5 min for the realtime tests, while other jobs loaded the machine.)

Creates .venv with the project and its test extras, installs Debian's mariadb-server, galera-4
and rsync where the machine can have them (root with apt-get) so the MariaDB tests have a server
binary to start and the Galera tests a cluster (the tests start their own throwaway ``mariadbd``
on loopback with its own data directory, and a three-node Galera cluster of their own, and stop
them), lints, type-checks (mypy, strict on every product package: the ``[tool.mypy]``
section of pyproject.toml), then runs pytest. A lint or type error fails the command before any test runs.
In CI (``CI`` set) a MariaDB or Galera test that cannot reach its server fails rather than skips.

The two tiers (the markers are in pyproject.toml, the Hypothesis profiles in tests/support/tiers.py):

* **default, the fast tier**: every test not marked ``slow``, spread over the cores by
  pytest-xdist (``-n auto``; each worker starts its own throwaway MariaDB), with the ``fast``
  Hypothesis profile (a tenth of each property test's examples). What to run on every change.
* **``--all``**: every test with the ``ci`` profile (the full example counts), in two passes: the
  tests not marked ``realtime`` over the cores, then the ``realtime`` ones (judged by the wall
  clock: failover within 20 s, a 10 s outage, the Galera cluster) in one process, so other tests'
  load cannot push them past their bounds. ``.ci/run`` runs ``python3 scripts/test.py --all``.

Extra arguments go to pytest after the tier's own, so they may narrow it (``tests/runner -k
claim``) or override it (``-n 0`` for one process, ``-m slow``); ``--defect 6`` runs the tests of
defect 06 wherever they live. A test that hangs fails after 900 s (pytest-timeout).
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


FAST_TIER = ["-m", "not slow", "-n", "auto", "--hypothesis-profile=fast"]
# --all's two passes; pytest's exit code 5 is "no test collected", which a pass narrowed by the
# caller's arguments (``--all tests/runner``: no realtime test there) may rightly say.
ALL_SPREAD = ["-m", "not realtime", "-n", "auto", "--hypothesis-profile=ci"]
ALL_REALTIME = ["-m", "realtime", "-n", "0", "--hypothesis-profile=ci"]
NO_TESTS_COLLECTED = 5


def lint_and_type_check(python: Path) -> int:
    for check in (["check", "."], ["format", "--check", "."]):
        say("ruff " + " ".join(check))
        lint = subprocess.run([str(BIN / "ruff"), *check], cwd=ROOT)
        if lint.returncode != 0:
            return lint.returncode
    say("mypy (strict: runner, bridge, actions, bot, wiring, cli, rehearsal)")
    return subprocess.run([str(python), "-m", "mypy"], cwd=ROOT).returncode


def pytest(python: Path, what: str, options: list[str], extra: list[str]) -> int:
    say(f"pytest: {what} ({' '.join([*options, *extra])})")
    return subprocess.run([str(python), "-m", "pytest", *options, *extra], cwd=ROOT).returncode


def main(argv: list[str]) -> int:
    everything = "--all" in argv
    extra = [arg for arg in argv if arg != "--all"]
    python = ensure_venv("test")
    provision_mariadb()
    checked = lint_and_type_check(python)
    if checked != 0:
        return checked
    if not everything:
        return pytest(python, "the fast tier (not slow)", FAST_TIER, extra)
    # Both passes run even when the first fails: CI's log then shows every failure of the change.
    results = [
        pytest(python, "everything but the realtime tests, over the cores", ALL_SPREAD, extra),
        pytest(python, "the realtime tests, one process", ALL_REALTIME, extra),
    ]
    if all(code == NO_TESTS_COLLECTED for code in results):
        return NO_TESTS_COLLECTED
    return next((code for code in results if code not in (0, NO_TESTS_COLLECTED)), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
