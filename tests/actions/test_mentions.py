"""The one mention policy (``actions.mentions``): who is pinged, what is shown inert, and when a
ping role makes the step impossible to post. Both deliveries apply it; this pins the rules."""

from __future__ import annotations

import dataclasses

import pytest

from actions.delivery import Announcement, Cue
from actions.mentions import Mentions, PingPolicy, decide, for_request

PLAYERS, GM, QUIET = 501, 502, 503
ROLES = {"players": PLAYERS, "gm": GM, "quiet": QUIET}
POLICY = PingPolicy(ROLES, ("players",), allow_everyone=False)


def announce(ping_role: str | None, content: str | None, policy: PingPolicy = POLICY, **kw: bool) -> Mentions:
    return decide(policy, ping_role=ping_role, content=content, announcement=True, **kw)


def test_an_allowed_role_pings_and_its_mention_goes_in_front() -> None:
    m = announce("players", "The raid begins!")
    assert m.pinged == ("@players",)
    assert m.inert == ()
    assert m.text(markup=True) == f"<@&{PLAYERS}> The raid begins!"
    assert m.text(markup=False) == "@players The raid begins!"
    assert m.allowed_role_ids == (PLAYERS,)
    assert (m.everyone, m.suppressed, m.problem) == (False, False, None)


def test_a_role_the_allow_list_lacks_is_shown_but_inert() -> None:
    """Discord is still told only the allow-list may ping, so the prefixed mention notifies nobody."""
    m = announce("gm", "Staff only")
    assert m.text(markup=True) == f"<@&{GM}> Staff only"
    assert (m.pinged, m.inert) == ((), ("@gm",))
    assert m.allowed_role_ids == (PLAYERS,)


def test_everyone_and_here_ping_only_with_allow_everyone() -> None:
    text = "@everyone and @here, twice: @everyone"
    closed = announce(None, text)
    assert (closed.pinged, closed.inert, closed.everyone) == ((), ("@everyone", "@here"), False)
    opened = announce(None, text, PingPolicy(ROLES, ("players",), allow_everyone=True))
    assert (opened.pinged, opened.inert, opened.everyone) == (("@everyone", "@here"), (), True)


def test_not_a_word_boundary_is_not_an_everyone_mention() -> None:
    assert announce(None, "mail @everyones_friend").inert == ()


def test_a_cue_pings_its_own_role_whatever_the_allow_list_says() -> None:
    m = decide(
        PingPolicy(ROLES, (), allow_everyone=True), ping_role="gm", content="@everyone", announcement=False
    )
    assert m.pinged == ("@gm",)
    assert m.allowed_role_ids == (GM,)
    assert m.everyone is False, "a cue never lets @everyone ping"
    assert m.inert == ("@everyone",)


def test_an_unknown_alias_is_a_problem_not_a_silently_dropped_ping() -> None:
    m = announce("ghosts", "boo")
    assert m.problem == "ping role 'ghosts' is not one of the role aliases in config (roles)"
    assert m.unknown_role == "ghosts"
    assert (m.pinged, m.inert) == ((), ())
    assert m.text(markup=True) == "boo", "nothing would stand for the role"


def test_a_raw_id_is_not_an_alias() -> None:
    assert announce(str(PLAYERS), None).unknown_role == str(PLAYERS)


def test_suppressed_shows_every_mention_and_pings_nobody() -> None:
    m = announce("players", "@everyone go", PingPolicy(ROLES, ("players",), True), suppressed=True)
    assert m.text(markup=True) == f"<@&{PLAYERS}> @everyone go"
    assert (m.pinged, m.inert) == ((), ("@players", "@everyone"))
    assert (m.allowed_role_ids, m.everyone, m.suppressed) == ((), False, True)


def test_with_no_server_configured_an_alias_stands_for_itself() -> None:
    """The offline quick start: no roles to hold the alias to, so it is shown as the author meant."""
    m = announce("raiders", "go", PingPolicy(None))
    assert (m.problem, m.pinged, m.role_id) == (None, ("@raiders",), None)
    assert m.text(markup=True) == "@raiders go"


def test_raw_mentions_in_the_text_follow_the_same_rule() -> None:
    """Discord pings a ``<@&id>`` written in the text when the role is allowed; users never."""
    m = announce(None, f"<@&{PLAYERS}> <@&{GM}> <@&999> <@42> <@!43>")
    assert m.pinged == ("@players",)
    assert m.inert == ("@gm", "<@&999>", "<@42>", "<@!43>")


def test_the_same_mention_twice_is_listed_once() -> None:
    assert announce("players", f"<@&{PLAYERS}> again").pinged == ("@players",)


def test_the_decision_is_a_frozen_record() -> None:
    m = announce("players", "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.pinged = ()  # type: ignore[misc]


def test_for_request_reads_an_announcement_and_a_cue() -> None:
    a = Announcement("announcements", "@everyone hi", None, "players", "a" * 40, 1, 2)
    c = Cue(None, "Boss", "@everyone is ignored: it is in the embed", "gm", "b" * 40, 1, 3)
    assert for_request(POLICY, a) == announce("players", "@everyone hi")
    cue = for_request(POLICY, c)
    assert (cue.pinged, cue.inert, cue.content) == (("@gm",), (), None)
    assert for_request(POLICY, c, suppressed=True).inert == ("@gm",)


def cue_pinging(members: list[str], *, suppressed: bool = False) -> Mentions:
    request = Cue(None, "Brief", "Brief them", "gm", "k" * 40, 1, 2, ping_members=tuple(members))
    return for_request(POLICY, request, suppressed=suppressed)


def test_a_cue_pinging_attendees_mentions_and_pings_each_after_its_role() -> None:
    m = cue_pinging(["11", "12"])
    assert m.text(markup=True) == f"<@&{GM}> <@11> <@12>"
    assert m.pinged == ("@gm", "<@11>", "<@12>")
    assert (m.allowed_role_ids, m.allowed_user_ids) == ((GM,), (11, 12))


def test_a_cue_pings_at_most_a_hundred_attendees_and_counts_the_rest() -> None:
    """Discord lets ``allowed_mentions.users`` name 100 ids; short ids, so the 2000 characters
    are not what stops it."""
    m = cue_pinging([str(n) for n in range(1, 151)])
    assert len(m.allowed_user_ids) == len(m.member_ids) == 100
    assert m.more_members == 50
    text = m.text(markup=True) or ""
    assert text.endswith("<@100> and 50 more") and len(text) <= 2000


def test_a_cue_pings_as_many_attendees_as_fit_in_a_message() -> None:
    """Snowflakes of 19 digits: fewer than 100 mentions fit in 2000 characters with the role's."""
    members = [str(10**18 + n) for n in range(120)]
    m = cue_pinging(members)
    text = m.text(markup=True) or ""
    assert len(text) <= 2000
    assert 0 < len(m.member_ids) < 100 and m.more_members == 120 - len(m.member_ids)
    assert text.endswith(f" and {m.more_members} more")
    assert m.member_ids == tuple(members[: len(m.member_ids)]), "in click order"


def test_a_suppressed_cue_shows_its_attendees_and_pings_nobody() -> None:
    m = cue_pinging(["11"], suppressed=True)
    assert m.text(markup=True) == f"<@&{GM}> <@11>"
    assert (m.pinged, m.allowed_user_ids) == ((), ())
    assert "<@11>" in m.inert
