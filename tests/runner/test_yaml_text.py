"""``runner.yaml_text``: every way YAML text can fail to load is one located ``YamlError``."""

from __future__ import annotations

import time

import pytest

from runner.yaml_text import MAX_BRACKET_DEPTH, MAX_DEPTH, YamlError, decode, parse


@pytest.mark.parametrize(
    ("text", "line", "column", "says"),
    [
        ("a: 1\nb: 2026-01-01T00:00:00+25:00\n", 2, 4, "time zone offset must be less than 24 hours"),
        ("a: 2026-13-01\n", 1, 4, "not a valid date or time (month must be in 1..12)"),
        ("a: 2026-02-30 10:00:00\n", 1, 4, "not a valid date or time"),
        ("x: 1\ny: 2\nz: " + "9" * 4301 + "\n", 3, 4, "more than 4,300 digits"),
        ("a: !!int zz\n", 1, 4, "cannot read this value 'zz' as a whole number (!!int)"),
        ("a: !!bool maybe\n", 1, 4, "cannot read this value 'maybe' as true or false (!!bool)"),
        ("a:\n\t- x\n", 2, 1, "YAML syntax error: a tab: YAML indents with spaces only"),
        ("a: !!timestamp 2026\n", 1, 4, "not a valid date or time"),
        ("a: [1, 2\n", 2, 1, "YAML syntax error"),
        ("a: b\x00\n", 1, 5, "the character #x0000 is not allowed"),
        ("a: " + "[" * (MAX_DEPTH + 5), 1, MAX_DEPTH + 3, f"nested more than {MAX_DEPTH} levels deep"),
        ("a: !!python/object:os.system x\n", 1, 4, "the tag !!python/object:os.system is not allowed here"),
        ("---\na: 1\n---\nb: 2\n", 3, 1, "expected a single document"),
        ('a: "\\U00110000"\n', 1, 7, "an escape that names no Unicode character"),
        ('b: 1\na: "x \\UFFFFFFFF y"\n', 2, 9, "an escape that names no Unicode character"),
    ],
)
def test_a_bad_value_is_one_located_line(text: str, line: int, column: int, says: str) -> None:
    with pytest.raises(YamlError) as caught:
        parse(text)
    message = str(caught.value)
    assert message.startswith(f"line {line}, column {column}: "), message
    assert says in message
    assert "\n" not in message
    assert (caught.value.line, caught.value.column) == (line, column)


def test_deep_but_reasonable_nesting_still_loads() -> None:
    depth = MAX_DEPTH - 2
    expected: list[object] = []
    for _ in range(depth - 1):
        expected = [expected]
    assert parse("a: " + "[" * depth + "]" * depth) == {"a": expected}


def test_bytes_that_are_not_utf8_name_their_line_and_column() -> None:
    with pytest.raises(YamlError) as caught:
        decode(b"a: 1\nguild_id: \xff\xfe\n")
    assert str(caught.value) == (
        "line 2, column 11: the file is not UTF-8 text (byte 0xff); save it as UTF-8"
    )


def test_a_byte_order_mark_is_not_part_of_the_text() -> None:
    assert parse(decode(b"\xef\xbb\xbfa: 1\n")) == {"a": 1}


def test_a_huge_run_of_brackets_is_refused_at_once_not_in_quadratic_time() -> None:
    """Found by the config fuzz: PyYAML's scanner reads a run of "[" in time quadratic in its
    length before the depth limit can act (3,000 took 0.4 s; 100,000 would take most of an
    hour). Such text is now refused by a count made first, located, in a moment."""
    started = time.perf_counter()
    with pytest.raises(YamlError) as caught:
        parse("guild_id: " + "[" * 100_000)
    assert time.perf_counter() - started < 0.5
    assert (
        str(caught.value)
        == f"line 1, column {11 + MAX_BRACKET_DEPTH}: nested more than {MAX_DEPTH} levels deep"
    )


COMMENT_HINT = "a # after a space starts a YAML comment, so the rest of that line was not read"


def test_defect_a_hash_inside_braces_is_named_where_it_is_not_at_the_end_of_the_file() -> None:
    """Before: ``{channel: #announcements, content: hi}`` said only "expected the node content,
    but found '<stream end>'" at the line after the last: the # had made the rest of its line a
    comment. Now the message names the line with the # and the fix (issue 26 item 5)."""
    text = "key: x\nparams: {channel: #announcements, content: hi}\nother: 1\n"
    with pytest.raises(YamlError) as caught:
        parse(text)
    assert f"(line 2: {COMMENT_HINT}: write '#name' in quotes, or leave the # out)" in str(caught.value)


def test_a_comment_after_closed_braces_is_not_blamed_for_another_error() -> None:
    with pytest.raises(YamlError) as caught:
        parse("params: {duration: 1m}  # a short wait\nbad: [1, 2\n")
    assert COMMENT_HINT not in str(caught.value)
