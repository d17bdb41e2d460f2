"""Issue 26 item 3: a 244 KB upload listing 37,406 sign-up options took 18.6 s to refuse, on the
event loop, because the repeat checks (``list.count`` in a loop) ran before the 20-option and
500-scope limits. Every list is now refused by its limit before anything looks at each entry,
and the repeat checks are linear (``runner.definitions.keys.repeated``). Held structurally,
not by a clock: the repeat check is never handed more entries than the limit allows."""

from __future__ import annotations

from typing import Any

import pytest

from actions import validation_registry
from runner.definitions import keys, model, parse_yaml, signup, validate
from runner.errors import DefinitionError
from runner.limits import MAX_SCOPES

UPLOAD_CAP = 256 * 1024


def _largest_under_cap(make: Any) -> str:
    low, high = 1, 100_000
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if len(make(middle)) < UPLOAD_CAP else (low, middle)
    return str(make(low))


def options_file(count: int) -> str:
    names = ", ".join(f"o{i}" for i in range(count))
    return (
        "key: big\ntitle: Big\nschedule: manual\n"
        f"signup:\n  channel: announcements\n  options: [{names}]\n"
        "phases:\n  - key: main\n    label: Main\n    steps:\n      - action: core.wait\n        params: {duration: 1m}\n"
    )


def scopes_file(count: int) -> str:
    names = ", ".join(f"s{i}" for i in range(count))
    return (
        f"key: big\ntitle: Big\nschedule: manual\nscopes: [{names}]\n"
        "phases:\n  - key: main\n    label: Main\n    steps:\n      - action: core.wait\n        params: {duration: 1m}\n"
    )


@pytest.fixture
def repeat_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of entries each repeat check is handed."""
    sizes: list[int] = []
    original = keys.repeated

    def counted(values: Any, folded: Any = None) -> list[Any]:
        items = list(values)
        sizes.append(len(items))
        return original(items, folded)

    monkeypatch.setattr(signup, "repeated", counted)
    monkeypatch.setattr(model, "repeated", counted)
    return sizes


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (options_file, "options; a sign-up may have at most 20"),
        (scopes_file, f"scopes; an event may have at most {MAX_SCOPES}"),
    ],
    ids=["options", "scopes"],
)
def test_defect_an_upload_of_37406_options_was_checked_for_repeats_before_its_limit(
    make: Any, said: str, repeat_checks: list[int]
) -> None:
    text = _largest_under_cap(make)
    assert len(text) > 240_000
    with pytest.raises(DefinitionError) as refused:
        validate(parse_yaml(text, file="big.yaml"), validation_registry(), file="big.yaml")
    assert any(said in str(p) for p in refused.value.problems), refused.value.problems
    assert max(repeat_checks, default=0) <= MAX_SCOPES, "a repeat check saw more than the limit allows"


def test_repeats_are_still_found_within_the_limits() -> None:
    assert keys.repeated(["a", "b", "a", "c", "b"]) == ["a", "b"]
    assert keys.repeated(["EU", "eu", "us"], [s.casefold() for s in ["EU", "eu", "us"]]) == ["EU", "eu"]
    assert keys.repeated([]) == []
