"""Fuzzing definitions (issue 8): 10,000 generated definition files through ``validate``'s own
entry point, ``cli.definitions.check_files``, in-process, and no traceback.

The files are YAML text (bytes, as they reach the reader), mostly near-valid: real definitions,
dumped, then damaged in the ways people and editors damage
them (a wrong type, a huge integer, an offset of 24 h or more, a date that does not exist, a
Unicode digit where an id goes, a placeholder typo, bytes that are not UTF-8, deep nesting,
aliases, an unknown key, a cut or doubled line) or broken structurally first. Half are checked
with a config that names a server, so the alias checks run too.

For every file:

* nothing but the located error escapes: ``check_files`` catches ``DefinitionError`` and
  nothing else, so any other exception fails the test with its traceback;
* every problem names the file and a place in it (a phase, a step or a field, or a line and
  column for a file that cannot be read as YAML), or is about the document as a whole, and is in
  the project's words, never pydantic's ("Input should be ...", "Field required");
* whatever validates is runnable: every step is accepted by its own action's params model at
  dispatch (in verify mode, every scope), it round-trips through the JSON that ``publish``
  stores, and its concurrency key fits its column.

The 10,000 are split over four tests (``BUDGET``), so one failing kind of input does not hide
the others; each asserts that its examples really ran and prints the count (``-s``). Damage is
done to a small fixed corpus of real definitions rather than to freshly generated ones, so the
time goes on the files themselves (the generated ones are ``test_bad_input``'s and get 200).
"""

from __future__ import annotations

import copy
import datetime as dt
import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.definitions import CheckedFile, check_files
from runner.errors import Problem
from tests.runner.test_validation_words import speaks_pydantic
from tests.support.definition_strategies import check_runnable, valid_definitions
from tests.support.tiers import examples
from wiring.config import Config

FUZZ = settings(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
LOCATED = re.compile(r"\bline \d+, column \d+\b")
# Problems about the document as a whole: its file is the place.
WHOLE_DOCUMENT = ("a definition must be a mapping of fields",)

# A server's config, for the half of the examples that are checked against one. Its aliases are
# the ones ``test_bad_input``'s valid definitions use, so a valid definition stays valid.
CONFIG = Config.model_validate(
    {
        "channels": {
            "general": 100000000000000101,
            "events": 100000000000000102,
            "announcements-2": 100000000000000103,
            "gm": 100000000000000104,
        },
        "roles": {"raiders": 100000000000000201, "everyone-events": 100000000000000202},
        "gm_channel": "gm",
        "announce": {"allowed_ping_roles": ["raiders"]},
    }
)

# Scalars that used to escape as tracebacks, or slip through validation, or both.
ODD_SCALARS = [
    "9" * 5000,
    "-" + "9" * 4301,
    "0x" + "f" * 40,
    "0b" + "1" * 200,
    "1_000_000_000_000_000_000_000",
    "1.0e+99999",
    ".nan",
    "-.inf",
    "2026-12-05T19:00:00+25:00",
    "2026-12-05T19:00:00-24:00",
    "2026-02-30",
    "2026-13-01T00:00:00Z",
    "0001-01-01T00:00:00+23:00",
    "9999-12-31T23:59:59-23:00",
    "!!int ''",
    "!!int zz",
    "!!timestamp soon",
    "!!bool maybe",
    "!!float x",
    "!!binary '==='",
    "!!set {a}",
    "!!omap [1]",
    "!!python/object:os.system x",
    '"²"',
    '"١٢٣٤٥٦٧٨٩٠١٢٣٤٥"',
    '"１２３４５６７８９０１２３４５６"',
    '"{scop}"',
    '"{ scope }"',
    '"{scope:upper}"',
    '"{{"',
    '"}} {Scope}"',
    '"\\0"',
    '"\\u202e"',
    "~",
    "[]",
    "{}",
    "*nowhere",
    "&anchor value",
    "'" + "x" * 2001 + "'",
    "'@everyone'",
    "123456789012345678",
    "'123456789012345678'",
    "yes",
    "0o777",
    "1:30",
]
BAD_BYTES = [
    b"\xff",
    b"\xfe\xff",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\x00",
    b"\x1b[2J",
]


def nested(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "1" + "]" * depth
    if kind == "map":
        return "{a: " * depth + "1" + "}" * depth
    # Aliases: each level repeats the one before nine times (a "billion laughs").
    lines = ["x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, depth)]
    return "\n".join(lines) + "\n"


def _corpus() -> list[dict[str, Any]]:
    """Real definitions to damage: small ones covering every action, every schedule kind,
    scopes, placeholders and escaped braces, a concurrency key, embeds and pings. Drawn from a
    fixed corpus (rather than generated afresh) so the budget goes on damaging, not building;
    ``test_bad_input`` generates fresh valid definitions of its own."""

    def one(key: str, steps: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        return {
            "key": key,
            "title": key.title(),
            **fields,
            "phases": [{"key": "main", "label": "Main", "steps": steps}],
        }

    announce = {
        "action": "discord.announce",
        "label": "Herald",
        "on_failure": "skip",
        "params": {
            "channel": "#general",
            "content": "{scope} is under attack! {{brace}}",
            "ping_role": "raiders",
        },
    }
    embed = {
        "action": "discord.announce",
        "params": {
            "channel": "events",
            "embed": {
                "title": "Invasion of {scope}",
                "description": "Gather at the gate.",
                "colour": "#8B0000",
                "image": "https://example.org/portal.png",
                "footer": "Good luck",
                "fields": [{"name": "Where", "value": "The gate of {scope}", "inline": True}],
            },
        },
    }
    cue = {
        "action": "gm.cue",
        "label": "Spawn the boss",
        "params": {"instructions": "Spawn it in {scope}.", "title": "Boss", "ping_role": "everyone-events"},
    }
    wait = {"action": "core.wait", "params": {"duration": "1h30m"}}
    return [
        one("plain", [announce, wait, cue]),
        one("scoped", [embed, wait], scopes=["aurora", "borealis"], concurrency_key="invasion:{scope}"),
        one(
            "weekly", [cue], schedule={"cron": "0 20 * * FRI", "timezone": "Europe/London"}, grace_seconds=600
        ),
        one("once", [announce], schedule={"once": "2099-12-05T19:00:00+01:00"}, description="Once only."),
        {
            "key": "two-phases",
            "title": "Two phases",
            "schedule": "manual",
            "phases": [
                {
                    "key": "opening",
                    "label": "Opening",
                    "steps": [announce, {"action": "core.wait", "params": {"duration": 90}}],
                },
                {"key": "closing", "label": "Closing", "steps": [cue, embed]},
            ],
        },
    ]


# libyaml's emitter when there is one: writing the files is the test's cost, not the subject's.
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump(value: Any, unicode: bool = True) -> str:
    return yaml.dump(value, Dumper=DUMPER, allow_unicode=unicode, sort_keys=False, width=10_000)


CORPUS = _corpus()
CORPUS_TEXT = [dump(raw) for raw in CORPUS]


def damage_text(rng: random.Random) -> bytes:
    """A real definition as YAML text, damaged one to three times."""
    text = rng.choice(CORPUS_TEXT)
    for _ in range(rng.randint(1, 3)):
        lines = text.split("\n")
        where = rng.randrange(len(lines))
        how = rng.choice(
            ["scalar", "scalar", "scalar", "unknown key", "nesting", "cut", "double", "crlf", "tab", "bom"]
        )
        line = lines[where]
        if how == "scalar" and ": " in line:
            key, _ = line.split(": ", 1)
            lines[where] = f"{key}: {rng.choice(ODD_SCALARS)}"
        elif how == "scalar" and line.lstrip().startswith("- "):
            indent = line[: len(line) - len(line.lstrip())]
            lines[where] = f"{indent}- {rng.choice(ODD_SCALARS)}"
        elif how == "unknown key":
            indent = line[: len(line) - len(line.lstrip())]
            lines.insert(where, f"{indent}{rng.choice(['timeout', 'Key', 'scope', 'x'])}: 1")
        elif how == "nesting" and ": " in line:
            key, _ = line.split(": ", 1)
            kind = rng.choice(["list", "map", "alias"])
            # Past the reader's limit (100 levels) now and then; deeper costs time, proves nothing.
            depth = (
                rng.randint(1, 9)
                if kind == "alias"
                else rng.choice([rng.randint(1, 30), rng.randint(95, 130)])
            )
            if kind == "alias":
                lines.insert(0, nested(depth, kind).rstrip("\n"))
                lines[where + 1] = f"{key}: *a{depth - 1}"
            else:
                lines[where] = f"{key}: {nested(depth, kind)}"
        elif how == "cut":
            lines[where] = line[: rng.randint(0, len(line))]
        elif how == "double":
            lines.insert(where, line)
        elif how == "tab":
            lines[where] = "\t" + line
        text = "\n".join(lines)
        if how == "crlf":
            text = text.replace("\n", "\r\n")
        elif how == "bom":
            text = "\ufeff" + text
    data = text.encode("utf-8")
    if rng.randrange(6) == 0:
        at = rng.randint(0, len(data))
        data = data[:at] + rng.choice(BAD_BYTES) + data[at:]
    return data


# Values a structural mutation puts in place of one: wrong types, huge and non-finite numbers,
# odd text, YAML-only types (safe_dump writes bytes as !!binary, datetimes as timestamps).
ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    2**63,
    2**64,
    -(2**70),
    10**40,
    float("nan"),
    float("inf"),
    "",
    " ",
    "x" * 2001,
    "²",
    "١٢٣",
    "ｇｍ",
    "{scop}",
    "{ scope }",
    "{scope!r}",
    "{{",
    "}",
    "\x00",
    "\u202e",
    "🎉" * 70,
    "123456789012345678",
    "#²",
    "99999999999999999999999",
    "nan",
    "1e999",
    "-5m",
    "٣m",
    "0",
    "7d1s",
    [],
    [1, "a"],
    {},
    {"a": {"b": {"c": [None]}}},
    b"bytes",
    dt.datetime(2026, 12, 5, 19, 0),
    dt.date(2026, 2, 28),
    {"kind": "weekly"},
    {"cron": "* * * * *", "timezone": "UTC"},
    {"cron": "*/5 * * * * *", "timezone": "UTC"},
    {"once": "2026-12-05T19:00:00"},
    ["dup", "dup"],
    ["eu", "EU"],
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


PATHS = [_paths(raw) for raw in CORPUS]


def break_structure(rng: random.Random) -> bytes:
    """A real definition with one to three of its values replaced, removed or joined by an
    unknown key, then written as YAML."""
    index = rng.randrange(len(CORPUS))
    raw = copy.deepcopy(CORPUS[index])
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(PATHS[index])
        parent: Any = raw
        try:
            for part in path[:-1]:
                parent = parent[part]
            last = path[-1]
            how = rng.choice(["replace", "replace", "replace", "delete", "unknown key"])
            if how == "replace":
                parent[last] = copy.deepcopy(rng.choice(ODD_VALUES))
            elif how == "delete":
                del parent[last]
            elif isinstance(parent, dict):
                parent[rng.choice(["timeout", "", "Key", 7])] = 1
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation already replaced what this path ran through
    return dump(raw, rng.random() < 0.5).encode()


# One draw per file: the damage is chosen by a seeded ``random.Random``, so hypothesis spends
# its time on files rather than on bookkeeping thousands of small choices. A failure still
# prints the file itself (the ``data`` argument), which is what is needed to pin it.
SEEDS = st.integers(min_value=0, max_value=2**63)


def as_text(raw: Any) -> st.SearchStrategy[bytes]:
    return st.builds(lambda r, u: dump(r, u).encode(), st.just(raw), st.booleans())


ALPHABET = "key: title phases steps params - [ ] { } # & * ! | > ' \" % @ ` , ? \n \t ² ١ ｇ 🎉 \u202e \x00 é"


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice(ODD_VALUES[:40])
    if kind == 1:
        return rng.randint(-(2**70), 2**70)
    if kind == 2:
        return "".join(rng.choice(ALPHABET.split(" ")) for _ in range(rng.randint(0, 12)))
    if kind == 3:
        return None
    if kind in (4, 5):
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["key", "title", "phases", "steps", "action", "params", "schedule", "scopes", "x", ""]
    return {rng.choice(keys): random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def random_document(rng: random.Random) -> bytes:
    """Anything at all: random bytes, random text from YAML's punctuation and odd characters, or
    a random value written as YAML (any shape, mostly not a definition)."""
    kind = rng.randrange(3)
    if kind == 0:
        return rng.randbytes(rng.randint(0, 400))
    if kind == 1:
        return " ".join(rng.choice(ALPHABET.split(" ")) for _ in range(rng.randint(0, 80))).encode()
    return dump(random_value(rng)).encode()


def located(problem: Problem) -> bool:
    return (
        problem.phase is not None
        or problem.field is not None
        or bool(LOCATED.search(problem.message))
        or problem.message in WHOLE_DOCUMENT
    )


class Counter:
    def __init__(self) -> None:
        self.examples = 0
        self.valid = 0


def through_validate(path: Path, data: bytes, config: Config | None, counter: Counter) -> None:
    """One file through ``validate``'s entry point, and the promises above."""
    counter.examples += 1
    path.write_bytes(data)
    [item] = check_files([path], config)
    assert isinstance(item, CheckedFile)
    if item.valid:
        assert item.definition is not None
        counter.valid += 1
        check_runnable(item.definition)
        return
    assert item.problems, "refused without a problem"
    for problem in item.problems:
        assert problem.file == str(path), f"{problem!r} does not name the file"
        assert problem.message.strip() and "\n" not in problem.message, f"not one line: {problem!r}"
        assert "Traceback" not in problem.message
        assert problem.step is None or problem.phase is not None, f"a step without its phase: {problem!r}"
        assert located(problem), f"names no place in the file: {problem}"
        assert not speaks_pydantic(problem.message), f"pydantic's words reach the author: {problem}"


def fuzz(name: str, inputs: st.SearchStrategy[bytes], tmp_path: Path, budget: int) -> Counter:
    counter = Counter()
    wanted = examples(budget)
    path = tmp_path / "event.yaml"

    @given(data=inputs, with_config=st.booleans())
    @settings(FUZZ, max_examples=wanted)
    def run(data: bytes, with_config: bool) -> None:
        through_validate(path, data, CONFIG if with_config else None, counter)

    run()
    print(f"\n{name}: {counter.examples} definition files through validate, {counter.valid} valid")
    assert counter.examples >= wanted, f"only {counter.examples} of {wanted} examples ran"
    TOTAL.append(counter.examples)
    return counter


TOTAL: list[int] = []
BUDGET = {"damaged text": 4_300, "broken structure": 3_500, "generated valid": 200, "any bytes": 2_000}
assert sum(BUDGET.values()) == 10_000


@pytest.mark.slow
def test_definition_files_damaged_as_text_never_raise(tmp_path: Path) -> None:
    fuzz(
        "damaged text",
        SEEDS.map(lambda seed: damage_text(random.Random(seed))),
        tmp_path,
        BUDGET["damaged text"],
    )


@pytest.mark.slow
def test_structurally_broken_definition_files_never_raise(tmp_path: Path) -> None:
    fuzz(
        "broken structure",
        SEEDS.map(lambda seed: break_structure(random.Random(seed))),
        tmp_path,
        BUDGET["broken structure"],
    )


@pytest.mark.slow
def test_generated_valid_definition_files_validate_and_are_runnable(tmp_path: Path) -> None:
    counter = fuzz(
        "generated valid", valid_definitions().flatmap(as_text), tmp_path, BUDGET["generated valid"]
    )
    # With no config, or one naming the aliases they use, real definitions must pass.
    assert counter.valid == counter.examples, f"{counter.examples - counter.valid} valid definitions refused"


@pytest.mark.slow
def test_any_bytes_at_all_never_raise(tmp_path: Path) -> None:
    fuzz(
        "any bytes",
        SEEDS.map(lambda seed: random_document(random.Random(seed))),
        tmp_path,
        BUDGET["any bytes"],
    )


def test_the_corpus_itself_is_valid(tmp_path: Path) -> None:
    """The damage is only meaningful against definitions that were valid before it."""
    counter = Counter()
    for text in CORPUS_TEXT:
        for config in (None, CONFIG):
            through_validate(tmp_path / "event.yaml", text.encode(), config, counter)
    assert counter.valid == counter.examples == 2 * len(CORPUS_TEXT)
