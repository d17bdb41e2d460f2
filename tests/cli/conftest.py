"""The command line, driven through ``cli.main(argv)`` exactly as ``python -m bot`` drives
it, with its output captured. ``main`` runs ``asyncio.run`` itself, so these tests are plain
synchronous functions (an async test would already be inside a running loop)."""

from __future__ import annotations

import asyncio
import os
import textwrap
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from cli import main
from runner.db import create_engine
from tests.support import definitions as factory

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))
EXAMPLE_CONFIG = REPO / "config.example.yaml"

T = TypeVar("T")


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Each test runs in an empty directory, with no EVENTBOT_* variable and no DISCORD_TOKEN
    from the developer's shell: a stray config.yaml or export must not change what is tested."""
    for name in list(os.environ):
        if name.startswith("EVENTBOT_") or name == "DISCORD_TOKEN":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


Cli = Callable[..., Result]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str | Path) -> Result:
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def on_database(url: str, work: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
    """Run ``work(engine)`` against ``url`` from a synchronous test."""

    async def run() -> T:
        engine = create_engine(url)
        try:
            return await work(engine)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def write_yaml(path: Path, data: Any) -> Path:
    """Write a definition or config: a dict is dumped as YAML, a string written as is."""
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def announce(channel: str, content: str, **extra: Any) -> dict[str, Any]:
    return factory.announce(content, channel, **extra)


def definition(*steps: dict[str, Any], key: str = "test-event", **fields: Any) -> dict[str, Any]:
    """A one-phase definition of ``steps`` (the definition factory's, titled "Test event")."""
    return factory.event(key, factory.phase("main", *steps), title="Test event", **fields)
