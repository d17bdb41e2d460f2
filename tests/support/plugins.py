"""Action plugins made visible to ``importlib.metadata`` for one test, installing nothing.

``install`` writes a ``*.dist-info`` (METADATA and entry_points.txt) into a fresh directory and
puts it on ``sys.path`` with ``monkeypatch``, so the entry point is found exactly as an installed
package's is, and is gone again after the test (a module it imported may stay in ``sys.modules``,
unreachable: nothing finds it without the entry point).
"""

from __future__ import annotations

import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from actions.plugins import GROUP

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_PLUGIN = REPO / "examples" / "plugin"


def install(
    monkeypatch: pytest.MonkeyPatch,
    where: Path,
    distribution: str,
    entry_points: dict[str, str],
    modules: dict[str, str] | None = None,
    *,
    code_dir: Path | None = None,
    version: str = "1.0",
) -> Path:
    """Make ``distribution`` (``version``) visible with ``entry_points`` (name: ``module:attr``)
    in the group, and ``modules`` (name: source) importable; ``code_dir`` is put on the path too
    (a package's own folder, as the example plugin's). Answers the directory on the path."""
    root = where / f"site-{distribution}"
    info = root / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n", encoding="utf-8"
    )
    lines = [f"[{GROUP}]", *(f"{name} = {value}" for name, value in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name, source in (modules or {}).items():
        (root / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        # A module of the same name imported by an earlier test must not stand in for this one.
        monkeypatch.delitem(sys.modules, name, raising=False)
    if code_dir is not None:
        monkeypatch.syspath_prepend(str(code_dir))
    monkeypatch.syspath_prepend(str(root))
    return root


def install_example(monkeypatch: pytest.MonkeyPatch, where: Path) -> Path:
    """examples/plugin, with the entry points its own pyproject.toml declares."""
    project = tomllib.loads((EXAMPLE_PLUGIN / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return install(
        monkeypatch,
        where,
        project["name"],
        project["entry-points"][GROUP],
        code_dir=EXAMPLE_PLUGIN,
        version=project["version"],
    )
