"""``signup:`` on an event: its shape, every problem located (``signup.options.tank``), and its
role and channel aliases checked against the config beside the steps' aliases."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from actions import validation_registry
from runner.definitions import EventDefinition, SignupDefinition, validate
from runner.errors import DefinitionError
from tests.support.definitions import event, phase, wait
from wiring.config import load
from wiring.definition_checks import check_aliases, check_parsed

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "config.example.yaml"


def with_signup(signup: Any) -> dict[str, Any]:
    return event("raid", phase("main", wait("1m")), signup=signup)


def problems_of(signup: Any) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        validate(with_signup(signup), validation_registry())
    return [str(p) for p in caught.value.problems]


def test_named_slots_with_capacities_an_overall_capacity_and_a_closing_time() -> None:
    definition = validate(
        with_signup(
            {
                "options": {"tank": 2, "healer": 2, "dps": 6},
                "capacity": 10,
                "closes": "2h",
                "late_cancel": "90m",
                "roles": ["staff"],
                "attendee_role": "event-team",
                "channel": "announcements",
            }
        ),
        validation_registry(),
    )
    signup = definition.signup
    assert signup is not None
    assert signup.options == {"tank": 2, "healer": 2, "dps": 6}
    assert (signup.capacity, signup.closes_before_start(), signup.late_cancel) == (10, 7200.0, 5400.0)
    assert signup.role_aliases() == ["staff", "event-team"]


def test_a_list_of_names_is_options_without_a_capacity_and_sign_ups_close_at_the_start() -> None:
    signup = SignupDefinition.model_validate({"options": ["going", "maybe"]})
    assert signup.options == {"going": None, "maybe": None}
    assert signup.closes == "start" and signup.closes_before_start() == 0.0
    assert signup.late_cancel == 2 * 3600


@pytest.mark.parametrize(
    ("signup", "said"),
    [
        ({"options": {"tank": 0, "dps": 6}}, "field 'signup.options.tank': must be at least 1"),
        ({"options": {"tank": "two"}}, "field 'signup.options.tank': must be a whole number"),
        ({"options": {"Tank": 2}}, "'Tank' is not a key (it has upper case letters)"),
        ({"options": []}, "field 'signup.options': give at least one option"),
        ({"options": ["going", "going"]}, "field 'signup.options': options listed twice: going"),
        ({"options": ["going"], "closes": "soon"}, "field 'signup.closes': 'soon' is not a duration"),
        ({"options": ["going"], "roles": ["123456"]}, "field 'signup.roles.0': '123456' is a role id"),
        ({"options": ["going"], "attendee_role": "a b"}, "field 'signup.attendee_role': 'a b' is not a role"),
        ({"options": ["going"], "channel": "Town Square"}, "field 'signup.channel': 'Town Square' is not a"),
        ({"options": {"tank": 2}, "capacity": 5}, "field 'signup': capacity 5 can never be reached"),
        ({"options": ["going"], "seats": 5}, "field 'signup.seats'"),
        (
            {"options": ["going", "maybe"], "interested": "perhaps"},
            "field 'signup.interested': 'perhaps' is not one of the options (going, maybe)",
        ),
    ],
)
def test_every_problem_names_its_place_in_the_sign_up(signup: dict[str, Any], said: str) -> None:
    found = problems_of(signup)
    assert any(said in line for line in found), found


def test_two_problems_in_one_sign_up_are_both_reported() -> None:
    found = problems_of({"options": {"tank": 0, "dps": "x"}, "closes": "soon"})
    assert sum("signup." in line for line in found) == 3, found


def test_an_event_without_a_sign_up_hashes_as_it_did_before_sign_ups_existed() -> None:
    definition = EventDefinition.model_validate(event("plain", phase("main", wait("1m"))))
    assert '"signup"' not in definition.canonical_json()


def test_the_sign_ups_aliases_are_checked_against_the_config_beside_the_steps() -> None:
    config = load(EXAMPLE_CONFIG)
    spec = with_signup(
        {
            "options": ["going"],
            "roles": ["staff", "warriors"],
            "attendee_role": "quizmaster",
            "channel": "warbands",
        }
    )
    checked = [check_parsed("raid.yaml", spec, validation_registry())]
    assert checked[0].valid
    asyncio.run(check_aliases(checked, config))
    found = [str(p) for p in checked[0].problems]
    assert any("'signup.roles.1': role 'warriors' is not one of the role aliases" in line for line in found)
    assert any(
        "'signup.attendee_role': role 'quizmaster'" in line and "did you mean 'quizmasters'" in line
        for line in found
    ), found
    assert any(
        "'signup.channel': channel 'warbands' is not one of the channel aliases" in line for line in found
    )
    assert not any("signup.roles.0" in line for line in found)


def test_interested_names_the_option_interested_members_are_signed_up_to() -> None:
    signup = SignupDefinition.model_validate({"options": ["going", "maybe"], "interested": "maybe"})
    assert signup.interested == "maybe"
    assert SignupDefinition.model_validate({"options": ["going"]}).interested is None


def test_defect_a_sign_up_with_no_channel_and_no_signup_step_was_accepted() -> None:
    """No ``signup.channel`` and no ``discord.signup`` step: no message would ever carry the
    buttons. Refused where validate and publish both look (``validate``), with the fix named."""
    assert problems_of({"options": ["going"]}) == [
        "field 'signup': no sign-up message would ever be posted: give signup.channel (posted when "
        "the run is booked) or add a discord.signup step"
    ]
    assert validate(with_signup({"options": ["going"], "channel": "raids"}), validation_registry())


def test_defect_a_once_whose_sign_ups_close_before_it_is_published_was_accepted() -> None:
    """A ``once`` three hours after publishing whose sign-ups close four hours before it: closed
    from the moment it is published. The same event an hour earlier in the day, or closing an
    hour before, is fine."""
    import datetime as dt

    now = dt.datetime(2026, 9, 2, 12, 0)
    raw = event(
        "raid",
        phase("main", wait("1m")),
        schedule={"once": "2026-09-02T15:00:00Z"},
        signup={"options": ["going"], "channel": "raids", "closes": "4h"},
    )
    with pytest.raises(DefinitionError) as caught:
        validate(raw, validation_registry(), now=now)
    [problem] = caught.value.problems
    assert problem.field == "signup.closes"
    assert str(problem).endswith(
        "sign-ups would close Wed 02 Sep 2026 11:00 UTC, which has already passed: nobody could "
        "sign up (a shorter closes:, or closes: start or end)"
    )
    raw["signup"]["closes"] = "1h"
    assert validate(raw, validation_registry(), now=now)


def test_options_adding_up_past_the_overall_capacity_are_a_warning_not_a_refusal() -> None:
    from wiring.definition_checks import warnings

    signup = {"options": {"tank": 2, "dps": 6}, "capacity": 5, "channel": "raids"}
    definition = validate(with_signup(signup), validation_registry())
    assert warnings(definition) == [
        "signup: the options hold 8 seats together and the event 5: once 5 are taken, members "
        "join a waiting list though their option shows seats"
    ]
    assert warnings(validate(with_signup({**signup, "capacity": 8}), validation_registry())) == []
    assert warnings(validate(with_signup({**signup, "options": ["a", "b"]}), validation_registry())) == []
