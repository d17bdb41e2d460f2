"""pytest plugin: every simcord test is held to Discord's OpenAPI description.

simcord records each REST request the bot's HTTP client and webhook adapter make (interaction
callbacks and followups included) in ``Env.http_requests``. After a test's body, and again once
its fixtures are torn down, the requests of every simcord ``Env`` the test used are checked by
``tests/support/discord_openapi.py``. One that does not conform fails the test that made it,
naming the request and what is wrong. A test that already failed is not checked on top.

``tests/conftest.py`` registers this module, so it covers every directory with simcord tests.
The terminal summary says how many requests on how many routes were checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pytest
import simcord

from tests.support.discord_openapi import SpecMismatch, spec

# How many of each Env's requests this test has checked already, by id(env).
_CHECKED = pytest.StashKey[dict[int, int]]()


@dataclass
class Tally:
    """What one session checked, for its terminal summary."""

    requests: int = 0
    routes: set[str] = field(default_factory=set)


_TALLY = pytest.StashKey[Tally]()


def check_requests(entries: Iterable[simcord.HttpLogEntry], tally: Tally | None = None) -> None:
    """Raise :class:`SpecMismatch` listing every request in ``entries`` that does not conform."""
    checker = spec()
    tally = Tally() if tally is None else tally
    problems: list[str] = []
    for entry in entries:
        problems += checker.problems(entry.method, entry.path, entry.params, entry.json)
        operation = checker.operation(entry.method, entry.path)
        tally.requests += 1
        if not isinstance(operation, str):
            tally.routes.add(operation.route)
    if problems:
        raise SpecMismatch(
            f"{len(problems)} request(s) do not conform to Discord's OpenAPI description "
            "(tests/support/discord-openapi/openapi.json):\n" + "\n".join(f"- {p}" for p in problems)
        )


def _envs(item: pytest.Item) -> Iterator[simcord.Env]:
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, simcord.Env):
            yield value


def _check_item(item: pytest.Item) -> None:
    checked = item.stash.setdefault(_CHECKED, {})
    for env in _envs(item):
        start = checked.get(id(env), 0)
        entries = env.http_requests[start:]
        checked[id(env)] = start + len(entries)
        try:
            check_requests(entries, item.config.stash.setdefault(_TALLY, Tally()))
        except SpecMismatch as exc:
            pytest.fail(str(exc), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    # Checked here, so a mismatch fails the test itself rather than erroring its teardown.
    result = yield
    _check_item(item)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    # And again for whatever the bot sent while its fixtures shut it down.
    result = yield
    _check_item(item)
    return result


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    tally = terminalreporter.config.stash.get(_TALLY, None)
    if tally is not None and tally.requests:
        terminalreporter.write_line(
            f"Discord OpenAPI: {tally.requests} REST requests on {len(tally.routes)} routes "
            "checked against openapi.json"
        )
