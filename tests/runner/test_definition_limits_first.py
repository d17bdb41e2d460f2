"""Issue 26 item 3: a 244 KB upload listing 37,406 sign-up options took 18.6 s to refuse, on the
event loop, because the repeat checks (``list.count`` in a loop) ran before the 20-option and
500-scope limits. Every list is now held to its limit before anything looks at its entries (a
list past it is cut to it: ``runner.definitions.sizes``), the repeat checks are linear
(``runner.definitions.keys.repeated``), a definition of more than ``MAX_VALUES`` values is refused
by a walk that stops there, and the YAML reader stops at ``MAX_NODES``.

Held structurally, not by a clock: for the worst file of each shape under the upload cap, the
work each check is handed is counted and must stay within the limits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from actions import validation_registry
from runner import limits, yaml_text
from runner.definitions import keys, model, parse_yaml, signup, validate, validation
from runner.definitions.signup import MAX_OPTIONS
from runner.errors import DefinitionError
from runner.limits import MAX_SCOPES
from tests.support.big_uploads import SHAPES, UPLOAD_CAP, largest_under_cap, options_list, scopes
from tests.support.definitions import event, phase, wait


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """What each costly check is handed: the entries of each repeat check, one entry per step
    or reminder whose params are checked against its action, and the values the YAML reader
    composed."""
    seen: dict[str, list[int]] = {"repeats": [], "params": [], "nodes": [0]}
    original_repeated, original_step = keys.repeated, validation._check_step
    original_node = yaml_text._Loader.compose_node

    def repeated(values: Any, folded: Any = None) -> list[Any]:
        items = list(values)
        seen["repeats"].append(len(items))
        return original_repeated(items, folded)

    def check_step(*args: Any, **kwargs: Any) -> Any:
        seen["params"].append(1)
        return original_step(*args, **kwargs)

    def compose_node(self: Any, parent: Any, index: Any) -> Any:
        seen["nodes"][0] += 1
        return original_node(self, parent, index)

    monkeypatch.setattr(signup, "repeated", repeated)
    monkeypatch.setattr(model, "repeated", repeated)
    monkeypatch.setattr(validation, "_check_step", check_step)
    monkeypatch.setattr(yaml_text._Loader, "compose_node", compose_node)
    return seen


# The words each shape is refused with: the field and the limit it breaks.
REFUSED = {
    # Over 40,000 one-letter names fit: the reader stops first. 37,406 are the case below.
    "options": (None, f"more than {yaml_text.MAX_NODES} values"),
    "options-mapping": (None, f"more than {yaml_text.MAX_NODES} values"),
    "scopes": (None, f"more than {yaml_text.MAX_NODES} values"),
    "phases": (None, f"more than {yaml_text.MAX_NODES} values"),
    "steps": ("phases", f"steps in all; an event may have at most {limits.MAX_STEPS}"),
    "reminders": ("reminders", f"at most {model.MAX_REMINDERS} are allowed"),
    "unknown-fields": (None, f"more than {yaml_text.MAX_NODES} values"),
    "aliased-params": ("params", f"more than {limits.MAX_VALUES} values"),
    "deep": (None, f"more than {yaml_text.MAX_NODES} values"),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_defect_upload_37406_options_every_worst_shape_under_the_cap_is_refused_by_a_limit_first(
    shape: str, work: dict[str, list[int]]
) -> None:
    """Each shape as large as fits under 256 KB is refused naming the field and the limit it
    breaks, and no check was handed more than the limits allow: no repeat check past the
    largest list limit, no params check past the step and reminder limits, and the reader
    stopped at its value budget."""
    text = largest_under_cap(SHAPES[shape])
    assert len(text.encode()) > UPLOAD_CAP - 1024
    with pytest.raises(DefinitionError) as refused:
        validate(parse_yaml(text, file="big.yaml"), validation_registry(), file="big.yaml")
    field, words = REFUSED[shape]
    problems = refused.value.problems
    assert any(words in p.message and p.field == field for p in problems), [str(p) for p in problems]
    assert max(work["repeats"], default=0) <= MAX_SCOPES
    assert len(work["params"]) <= limits.MAX_STEPS + model.MAX_REMINDERS
    assert work["nodes"][0] <= yaml_text.MAX_NODES + 1


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (options_list, f"options; a sign-up may have at most {MAX_OPTIONS}"),
        (scopes, f"scopes; an event may have at most {MAX_SCOPES}"),
    ],
    ids=["options", "scopes"],
)
def test_defect_an_upload_of_37406_options_was_checked_for_repeats_before_its_limit(
    make: Callable[[int], str], said: str, work: dict[str, list[int]]
) -> None:
    text = make(37_406)
    assert len(text.encode()) < UPLOAD_CAP
    with pytest.raises(DefinitionError) as refused:
        validate(parse_yaml(text, file="big.yaml"), validation_registry(), file="big.yaml")
    assert any(said in str(p) for p in refused.value.problems), refused.value.problems
    assert max(work["repeats"], default=0) <= MAX_SCOPES, "a repeat check saw more than the limit allows"


def test_entries_within_a_limit_are_still_checked_beside_it(work: dict[str, list[int]]) -> None:
    """A list past its limit is cut to it, not refused alone: a problem among the entries the
    limit allows comes in the same pass (a repeated scope, a step's bad params), and the
    entries past it are never looked at."""
    raw = event(
        "big",
        phase("main", *[wait()] * 150, {"action": "core.wait", "params": {"duration": "soon"}}),
        phase("more", *[wait()] * 100),
        scopes=["eu", "EU", *[f"s{i}" for i in range(600)]],
    )
    with pytest.raises(DefinitionError) as refused:
        validate(raw, validation_registry())
    said = [(p.field, p.message) for p in refused.value.problems]
    assert ("scopes", validation.too_many_scopes(602)) in said
    assert ("phases", validation.too_many_steps(251)) in said
    assert any("scopes listed twice" in m and "EU" in m for _, m in said), said
    assert any(
        p.phase == "main" and p.step == 150 and p.field == "params.duration" for p in refused.value.problems
    )
    assert len(work["params"]) == limits.MAX_STEPS
    assert max(work["repeats"]) == MAX_SCOPES


def test_a_billion_laughs_anywhere_is_refused_at_the_field_it_is_in() -> None:
    """Nine aliases of nine (387 million shared references) under any field are refused at that
    field by the values walk, which stops at its budget: it returns at all only because it
    does."""
    lines = ["x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    for field in ("description", "scopes", "signup", "reminders", "schedule"):
        text = "\n".join(lines[:8]) + f"\nkey: x\ntitle: X\n{field}: {lines[8].split(' ', 1)[1]}\n"
        with pytest.raises(DefinitionError) as refused:
            validate(parse_yaml(text), validation_registry())
        assert any(
            p.field == field and f"more than {limits.MAX_VALUES} values" in p.message
            for p in refused.value.problems
        ), (field, [str(p) for p in refused.value.problems])


def test_repeats_are_still_found_within_the_limits() -> None:
    assert keys.repeated(["a", "b", "a", "c", "b"]) == ["a", "b"]
    assert keys.repeated(["EU", "eu", "us"], [s.casefold() for s in ["EU", "eu", "us"]]) == ["EU", "eu"]
    assert keys.repeated([]) == []
