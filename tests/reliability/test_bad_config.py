"""Bad input, the configuration half (issue 8): generated config files, environment overrides and
database URLs.

The promise: whatever the file holds (wrong types, huge ints, negative and non-finite numbers,
unicode digits, bytes that are not UTF-8, unknown keys, deep nesting, YAML that constructs
nothing, token-looking values) and whatever the ``EVENTBOT_*`` variables say, the config loader,
called exactly as the CLI calls it (``cli.common.load_config(path)`` with the process environment),
either returns a config inside every documented bound or raises ``ConfigError``, and nothing else.
Every problem names its key (and the environment variable, when the value came from one) or, for
a file that is not readable YAML, its line and column. No problem repeats a token or a password.

Database URLs go through ``runner.db.check_url`` (the one check every command and the bot make):
it answers a parsed URL or ``DatabaseUrlError``, in one line, never with the password; and a URL
it accepts builds an engine without an error.

The definitions half is ``test_bad_input.py`` (whose YAML alphabet this borrows). Hypothesis
keeps no example database (``database=None``).
"""

from __future__ import annotations

import math
import os
import random
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.common import load_config
from runner import yaml_text
from runner.db import MARIADB_OPTIONS, DatabaseUrlError, check_url, create_engine
from tests.support.definition_strategies import YAML_ALPHABET
from tests.support.tiers import examples
from wiring.config import (
    ENV_PREFIX,
    REHEARSAL_SPEED_MAX,
    REHEARSAL_SPEED_MIN,
    SNOWFLAKE_MAX,
    TICK_INTERVAL_MAX,
    TICK_INTERVAL_MIN,
    Config,
    ConfigError,
)

CONFIGS = 10_000
URLS = 2_000
# Cases per Hypothesis example: its own overhead per example is several times PyYAML's, so each
# example is one seed for ``random.Random``, which makes a batch from the pools below. A failure
# prints its seed (and the blob that reproduces it).
BATCH = 10
SEEDS = st.integers(min_value=0, max_value=2**64 - 1)
FIELDS = tuple(Config.model_fields)
ENV_VARIABLES = {
    "database_url": "EVENTBOT_DATABASE_URL",
    "guild_id": "EVENTBOT_GUILD_ID",
    "tick_interval_seconds": "EVENTBOT_TICK_INTERVAL_SECONDS",
    "definitions_dir": "EVENTBOT_DEFINITIONS_DIR",
    "rehearsal_speed": "EVENTBOT_REHEARSAL_SPEED",
}

# ── Secrets: what must never be repeated back ───────────────────────────────

_B64 = string.ascii_letters + string.digits + "_-"
# Shaped like Discord bot tokens (three base64url parts), one of them also looking like an id.
TOKENS = [
    "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
    "OTAwMDAwMDAwMDAwMDAwMDAx.GhIjKl.mNoPqRsTuVwXyZ0123456789abcdEF",
    "2uuC5j345p7clGuJhUpL0Kfk.rTNcTW.999999999999999999999999999999",
]
# Distinctive, so none can turn up in a message by chance; with the characters that break URLs.
PASSWORD_ALPHABET = string.ascii_letters + string.digits + "@:/?#%!&=+"


# ── Database URLs ───────────────────────────────────────────────────────────

SCHEMES = ["mysql+asyncmy", "mysql+asyncmy", "mariadb+asyncmy", "mysql+pymysql", "mysql", "sqlite+aiosqlite"]
SCHEMES += ["sqlite+aiosqlite", "sqlite", "postgresql+asyncpg", "nonsense", ""]
HOSTS = ["db.example.org", "127.0.0.1", "[::1]", "", "h h", "a@b", "x/y", "\u00e9", "h:1"]
PORTS = [
    "",
    ":3306",
    ":1",
    ":65535",
    ":0",
    ":65536",
    ":99999",
    ":-1",
    ":abc",
    ":",
    ":3306x",
    ":\u0663\u0663",
    ":" + "9" * 30,
]
PATHS = [
    "/eventbot",
    "/",
    "",
    "/eventbot.sqlite3",
    "/:memory:",
    "//abs/x.db",
    "/a\x00b",
    "/\u00e9v\u00e9nements",
    "/a?b",
]
OPTIONS = [*sorted(MARIADB_OPTIONS), "foo", "client_flag", "timeout", "uri", "mode"]
OPTION_VALUES = [
    "utf8mb4",
    "UTF8MB4",
    "latin1",
    "nope",
    "",
    "5",
    "0",
    "3601",
    "true",
    "false",
    "yes",
    "\u0665",
]
OPTION_VALUES += ["1e3", "-1", "/etc/hostname", "/no/such/file", "/tmp", "a b", "%00"]


def database_url(rng: random.Random, passwords: set[str]) -> str:
    """A URL built from parts that are each sometimes wrong: scheme and driver, credentials with
    a distinctive password (added to ``passwords``), host, port, path and options."""
    password = "Pw9" + "".join(rng.choices(PASSWORD_ALPHABET, k=rng.randint(4, 12)))
    passwords.add(password)
    credentials = rng.choice(["", "eventbot@", f"eventbot:{password}@", f":{password}@"])
    options = [(rng.choice(OPTIONS), rng.choice(OPTION_VALUES)) for _ in range(rng.randint(0, 3))]
    query = "?" + "&".join(f"{k}={v}" for k, v in options) if options else ""
    scheme, host, port, path = (rng.choice(pool) for pool in (SCHEMES, HOSTS, PORTS, PATHS))
    if scheme.startswith("sqlite") and rng.random() < 0.5:
        return f"{scheme}://{path}{query}"
    return f"{scheme}://{credentials}{host}{port}{path}{query}"


def check_url_answer(url: str, passwords: set[str]) -> bool:
    """``check_url`` answers or refuses in one line without any password; True if accepted."""
    try:
        parsed = check_url(url)
    except DatabaseUrlError as exc:
        message = str(exc)
        assert message.startswith("database url") and "\n" not in message, message
        for secret in passwords:
            assert secret not in message, f"the password is shown: {message}"
        return False
    assert parsed.get_backend_name() in ("sqlite", "mysql", "mariadb")
    return True


@given(seed=SEEDS)
@settings(max_examples=examples(URLS // BATCH), deadline=None, database=None, print_blob=True)
def test_any_database_url_is_accepted_or_refused_in_one_line_without_its_password(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(BATCH):
        passwords: set[str] = set()
        url = database_url(rng, passwords)
        if check_url_answer(url, passwords):
            # Accepted means usable: the engine builds (it does not connect until asked).
            create_engine(url).sync_engine.dispose()


# ── Config files ────────────────────────────────────────────────────────────

# Lines no dumper would write: values PyYAML itself cannot construct, and other odd YAML.
RAW_SCALARS = [
    "9" * 5000,
    "-" + "1" * 4301,
    "0x" + "f" * 4000,
    "2026-01-01T00:00:00+25:00",
    "2026-01-01T00:00:00-24:00",
    "2026-13-01",
    "2026-02-30 10:00:00",
    "!!timestamp 2026",
    "!!int zz",
    "!!float x",
    "!!binary '@@'",
    "!!python/object:os.system x",
    "!!set {a, b}",
    "*undefined",
    "&a [*a]",
    ".inf",
    "-.inf",
    ".nan",
    "1e400",
    "-5",
    "0",
    "-0.0",
    "1e-9",
    "18446744073709551616",
    "18446744073709551615",
    "100000000000000001.0",
    "'\u0661\u0662\u0663'",
    "\u00b2",
    "~",
    "yes",
    "0o777",
    "1:30:00",
    "'   '",
    "[" * 150 + "]" * 150,
    "{" * 150 + "}" * 150,
    "[[[[[[[[[[1]]]]]]]]]]",
    '"\\ud800"',
    "\t",
    "@reserved",
    "%TAG",
    TOKENS[0],
]
# Values of every wrong (and some right) type and size, and nested shapes.
_SCALARS: list[Any] = [None, True, False, 0, -1, -5, 1, 2**63, 2**64, 2**64 - 1, 10**30, 10**400, -(10**400)]
_SCALARS += [0.0, -0.0, 1e-9, 0.49, 0.5, 300, 300.5, 1e17, float("inf"), float("-inf"), float("nan"), 1e308]
_SCALARS += ["", " ", "\n", "x" * 5000, "\u0661\u0662\u0663", "\u00b2", "12 34", "inf", "nan", "-5", "1e-9"]
_SCALARS += [
    "100000000000000101",
    "#news",
    "123",
    "news",
    "staff",
    "\u202e",
    "\U0001f389" * 70,
    "a\x00b",
    *TOKENS,
]
_SCALARS += ["sqlite+aiosqlite:///eventbot.sqlite3", "mysql+asyncmy://u:p@db:99999/x", "NULL", "{scope}"]
_NESTED: list[Any] = [[], {}, [1, "a"], {"a": 1}, [[[[["deep"]]]]], {"news": {"gm": [None]}}, {1: 2, None: 3}]
_NESTED += [{"news": 100000000000000101, "gm": TOKENS[1]}, {"123": 5, "#x": 1, "": 2, "two words": 3}]
_NESTED += [["staff", "gm"], {"start": ["staff"], "launch": [], "cue": "staff"}, {"allowed_ping_roles": [1]}]
_NESTED += [
    {"allow_everyone": "yes", "colour": "blue"},
    {TOKENS[2]: 1},
    [TOKENS[0]],
    {"a": {"b": {"c": {"d": 1}}}},
]
VALUES = [*_SCALARS, *_NESTED]
ODD_KEYS: list[Any] = [
    "colour",
    "token",
    "discord_token",
    "Guild_ID",
    "guild_id ",
    "",
    "\u00e9",
    "x" * 100,
    1,
    None,
]
ODD_KEYS += [True, "a: b", "1", "\x85", *TOKENS, "announce.allow_everyone"]
KEYS = [*FIELDS, *FIELDS, *ODD_KEYS]
ENV_VALUES = [
    "1e-9",
    "-5",
    "inf",
    "nan",
    "0",
    "0.5",
    "300",
    "10000",
    "1",
    " 7 ",
    "\u0663",
    "1_000",
    "0x10",
    "",
]
ENV_VALUES += [
    "18446744073709551616",
    "100000000000000001",
    "events",
    " ",
    "sqlite+aiosqlite:///e.sqlite3",
    *TOKENS,
]
BAD_BYTES = [b"\xff", b"\xc3", b"\xe9", b"\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]
WHOLE_FILES = [
    b"- a\n- b\n",
    b"just text\n",
    b"42\n",
    b"---\na: 1\n---\nb: 2\n",
    b"",
    b"\xef\xbb\xbf",
    b"\x00",
]


@dataclass
class Case:
    data: bytes
    environ: dict[str, str]
    secrets: set[str]


def config_case(rng: random.Random) -> Case:
    """One config file and its environment, built from the pools above (and the odd freshly
    made string) by choices from ``rng``: ten thousand must fit in the default suite."""
    secrets = set(TOKENS)
    doc: dict[Any, Any] = {}
    for _ in range(rng.randint(0, 5)):
        key = rng.choice(KEYS)
        choice = rng.randint(0, 9)
        if choice == 0:
            value: Any = "".join(rng.choices(YAML_ALPHABET + "\u00e9\u0663\U0001f389", k=rng.randint(0, 8)))
        elif choice == 1 and key == "database_url":
            value = database_url(rng, secrets)
        else:
            value = rng.choice(VALUES)
        doc[key] = value
    text = yaml.safe_dump(doc, allow_unicode=rng.random() < 0.5, sort_keys=False) if doc else ""
    for _ in range(rng.randint(0, 2)):
        text += f"{rng.choice(FIELDS)}: {rng.choice(RAW_SCALARS)}\n"
    data = text.encode("utf-8")
    mutation = rng.randint(0, 11)
    if mutation == 0:
        at = rng.randint(0, len(data))
        data = data[:at] + rng.choice(BAD_BYTES) + data[at:]
    elif mutation == 1:
        at = rng.randint(0, len(text))
        text = (
            text[:at]
            + "".join(rng.choices(YAML_ALPHABET, k=rng.randint(1, 6)))
            + text[at + rng.randint(0, 4) :]
        )
        data = text.encode("utf-8")
    elif mutation == 2:
        data = rng.choice(WHOLE_FILES)
    elif mutation == 3:
        # Deep nesting, flow style (any depth) or block style (an indent a level).
        depth = rng.choice([50, 99, 100, 101, 201, 3000, 100_000])
        if rng.random() < 0.5:
            data = ("guild_id: " + "[" * depth + "]" * depth + "\n").encode()
        else:
            data = "".join(" " * i + f"k{i}:\n" for i in range(min(depth, 120))).encode()
    environ = {}
    for variable in ENV_VARIABLES.values():
        if rng.random() < 0.2:
            if variable == "EVENTBOT_DATABASE_URL" and rng.random() < 0.5:
                value = database_url(rng, secrets)
            else:
                value = rng.choice(ENV_VALUES)
            # What an environment can hold: no NUL.
            environ[variable] = value.replace("\x00", "")
    return Case(data, environ, secrets)


def _top_level_keys(data: bytes) -> set[str]:
    """The keys the file really has (a mutation may have made new ones), and every field."""
    try:
        # Not yaml.safe_load: it takes minutes over the deepest files here (see yaml_text).
        loaded = yaml_text.parse(yaml_text.decode(data))
    except yaml_text.YamlError:  # a file that cannot be read has no keys to name
        loaded = None
    found = {str(key) for key in loaded} if isinstance(loaded, dict) else set()
    return found | set(FIELDS) | {"token"}


def _check_problem(problem: str, case: Case) -> None:
    environ = case.environ
    assert problem and "\n" not in problem, f"a problem that is not one line: {problem!r}"
    if problem.startswith("line "):
        head = problem.split(":", 1)[0]
        assert head.startswith("line ") and ", column " in head, problem
        return
    if problem in ("the config file must be a mapping of keys",) or problem.startswith(
        "cannot read the config file"
    ):
        return
    # "key: ", not "key:": a mutated key can be an existing one with ":more" after it, and its
    # problem ("rehearsal_speed:hold_waits_in_process: unknown key") is not rehearsal_speed's.
    named = [key for key in (*FIELDS, "token") if problem.startswith((f"{key}: ", f"{key}.", f"{key} ("))]
    if not named:
        # Read the file again only now (it is what costs): a mutation may have made new keys.
        keys = _top_level_keys(case.data)
        named = [key for key in keys if problem.startswith((f"{key}: ", f"{key}.", f"{key} ("))]
    if not named:
        # A key too odd to print as it is: shown quoted, cut short, or hidden.
        assert (
            problem.startswith(("'", '"', "<a value that looks like a secret"))
            or "..." in problem.split(": ")[0]
        ), f"a problem that names no key: {problem!r}"
        return
    for key in named:
        variable = ENV_VARIABLES.get(key)
        # A token found in the file is the file's problem, whatever the environment overrides.
        if variable is not None and environ.get(variable) and "looks like a Discord bot token" not in problem:
            assert f"(from {variable})" in problem, (
                f"an environment value's problem without its variable: {problem!r}"
            )


def _check_config(config: Config) -> None:
    """What a config that loads promises: every documented bound holds."""
    assert config.guild_id is None or 0 < config.guild_id <= SNOWFLAKE_MAX
    for aliases in (config.channels, config.roles):
        for alias, snowflake in aliases.items():
            assert alias and not alias.isdigit() and not alias.startswith("#")
            assert 0 < snowflake <= SNOWFLAKE_MAX
    assert math.isfinite(config.tick_interval_seconds)
    assert TICK_INTERVAL_MIN <= config.tick_interval_seconds <= TICK_INTERVAL_MAX
    assert REHEARSAL_SPEED_MIN <= config.rehearsal_speed <= REHEARSAL_SPEED_MAX
    check_url(config.database_url)
    assert config.definitions_dir.strip() and "\x00" not in config.definitions_dir


def test_ten_thousand_configs_load_or_are_refused_naming_their_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    counts = {"configs": 0, "loaded": 0, "refused": 0, "with environment": 0}
    clean = {name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)}

    @given(seed=SEEDS)
    @settings(
        max_examples=examples(CONFIGS // BATCH),
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    def load_batch(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(BATCH):
            load_one(config_case(rng))

    def load_one(case: Case) -> None:
        path.write_bytes(case.data)
        counts["configs"] += 1
        counts["with environment"] += bool(case.environ)
        with mock.patch.dict(os.environ, {**clean, **case.environ}, clear=True):
            try:
                config = load_config(str(path))
            except ConfigError as exc:
                counts["refused"] += 1
                assert exc.problems, "refused without a problem"
                shown = str(exc) + "\n".join(exc.problems)
                for secret in case.secrets:
                    assert secret not in shown, f"a secret is repeated back: {shown!r}"
                for problem in exc.problems:
                    _check_problem(problem, case)
                return
        counts["loaded"] += 1
        _check_config(config)

    started = time.monotonic()
    load_batch()
    elapsed = time.monotonic() - started
    print(
        f"\n{counts['configs']} generated configs through load_config in {elapsed:.1f} s: "
        f"{counts['loaded']} loaded, {counts['refused']} refused, {counts['with environment']} with "
        f"EVENTBOT_* overrides"
    )
    assert counts["configs"] >= examples(CONFIGS // BATCH) * BATCH
    assert counts["loaded"] and counts["refused"], "the generator never reached one side"


@pytest.mark.parametrize(
    "text",
    [
        b"guild_id: \xff\n",
        ("guild_id: " + "9" * 5000).encode(),
        b"definitions_dir: 2026-01-01T00:00:00+25:00\n",
        ("a: " + "[" * 3000).encode(),
    ],
)
def test_the_loader_strategies_reach_each_known_defect(tmp_path: Path, text: bytes) -> None:
    """The inputs issue 8 found, as plain examples, so the generator is known to reach them."""
    path = tmp_path / "c.yaml"
    path.write_bytes(text)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert caught.value.problems[0].startswith("line ")
