"""Every REST request the bot makes is held to Discord's OpenAPI description (issue 8).

``tests/support/discord_openapi_plugin.py`` checks the requests of every simcord test as it
runs. The tests here check the checker: that it refuses what Discord would refuse (so it cannot
quietly agree with anything), accepts the two conventions the spec does not describe and
nothing more, that the plugin really fails a test whose bot sent a bad request, and that one
session of everything staff and GMs do conforms, route by route.
"""

from __future__ import annotations

import hashlib
import textwrap
from typing import Any

import pytest

from tests.bot.conftest import Sim
from tests.support.discord_openapi import SPEC_PATH, SpecMismatch, spec
from tests.support.discord_openapi_plugin import check_requests

pytest_plugins = ("pytester",)

CHANNEL = "/channels/111111111111111111/messages"
CALLBACK = "/interactions/222222222222222222/a-token/callback"
FOLLOWUP = "/webhooks/333333333333333333/a-token"
SYNC = "/applications/333333333333333333/guilds/111111111111111111/commands"
OVERWRITE = "/channels/111111111111111111/permissions/444444444444444444"


def problems(method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> list[str]:
    return spec().problems(method, path, params, body)


def message(**overrides: Any) -> dict[str, Any]:
    """A message as discord.py builds it for an announcement with an embed and a GM cue's buttons."""
    body: dict[str, Any] = {
        "content": "<@&1456074443980800009> The raid begins!",
        "embeds": [
            {
                "type": "rich",
                "flags": 0,
                "title": "Harbour Raid",
                "description": "Bring a boat.",
                "color": 0xFF8800,
                "fields": [{"name": "Where", "value": "The docks", "inline": True}],
                "footer": {"text": "raid · version 1"},
            }
        ],
        "allowed_mentions": {"parse": [], "roles": [1456074443980800009]},
        "components": [
            {
                "type": 1,
                "components": [
                    {"type": 2, "style": 3, "label": "Confirm", "custom_id": "cue:2:confirm"},
                    {"type": 2, "style": 2, "label": "Skip", "custom_id": "cue:2:skip", "disabled": False},
                ],
            }
        ],
        "tts": False,
        "nonce": "run-1-step-2-attempt-1",
        "enforce_nonce": True,
    }
    body.update(overrides)
    return body


def command(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "event",
        "description": "Run live events",
        "type": 1,
        "options": [
            {
                "type": 1,
                "name": "pause",
                "description": "Pause a run",
                "options": [{"type": 4, "name": "run", "description": "The run", "required": True}],
            }
        ],
        "default_member_permissions": None,
    }
    body.update(overrides)
    return body


def test_the_vendored_spec_is_the_one_its_readme_pins() -> None:
    """The checker is only as good as the description it reads: the file is Discord's, byte for
    byte, at the commit ``discord-openapi/README.md`` names."""
    digest = hashlib.sha256(SPEC_PATH.read_bytes()).hexdigest()
    assert digest in (SPEC_PATH.parent / "README.md").read_text(encoding="utf-8")
    assert digest == "8c1d0707ccdf8e380a86dfba04058820a66435c1b69d5ed82e04dd8c0520dd73"


def test_a_message_as_the_bot_sends_it_conforms() -> None:
    assert problems("POST", CHANNEL, message()) == []
    assert problems("PATCH", f"{CHANNEL}/555555555555555555", message()) == []
    assert problems("PUT", SYNC, [command()]) == []


@pytest.mark.parametrize(
    ("body", "location", "says"),
    [
        (message(content=5), "$.content", "is not of type 'string', 'null'"),
        (message(content="x" * 4001), "$.content", "is too long"),
        (message(embeds=[{"title": "Raid", "color": "#ff8800"}]), "$.embeds[0].color", "is not of type"),
        (message(embeds=[{"title": "x" * 257}]), "$.embeds[0].title", "is too long"),
        (message(embeds=[{"fields": [{"name": "Where"}]}]), "$.embeds[0].fields[0]", "'value' is a required"),
        (message(embeds=[{"title": "t"}] * 11), "$.embeds", "is too long"),
        (message(allowed_mentions={"parse": ["players"]}), "$.allowed_mentions.parse[0]", "'players' is not valid"),
        (message(components=[{"type": 2, "style": 1, "label": "Go", "custom_id": "c"}]), "$.components[0]", "2 is not one of [1]"),
        (message(flags="64"), "$.flags", "is not of type 'integer', 'null'"),
    ],
    ids=["content-int", "content-long", "colour-hex", "title-long", "field-no-value", "eleven-embeds",
         "parse-role", "button-outside-a-row", "flags-string"],
)  # fmt: skip
def test_a_body_discord_would_refuse_is_refused_where_it_is_wrong(
    body: dict[str, Any], location: str, says: str
) -> None:
    """Each of these is one mistake in an otherwise good message; the problem names the request,
    the route it matched, and the place in the body."""
    (problem,) = problems("POST", CHANNEL, body)
    assert problem.startswith(f"POST {CHANNEL} (POST /channels/{{channel_id}}/messages): body at {location}")
    assert says in problem


def test_an_unknown_route_is_refused() -> None:
    assert problems("POST", "/channels/111111111111111111/announcements", {}) == [
        "POST /channels/111111111111111111/announcements: no route in Discord's OpenAPI description matches this path"
    ]
    assert "no route" in problems("GET", "/nowhere")[0]


def test_a_method_the_route_does_not_have_is_refused() -> None:
    (problem,) = problems("PUT", CHANNEL, message())
    assert problem == f"PUT {CHANNEL}: route /channels/{{channel_id}}/messages has no PUT (it has GET, POST)"


def test_a_body_is_sent_exactly_when_the_operation_takes_one() -> None:
    (missing,) = problems("POST", CHANNEL, None)
    assert missing.endswith("the operation requires a JSON body and none was sent")
    (extra,) = problems("GET", "/oauth2/applications/@me", {"name": "x"})
    assert extra.endswith("sends a body, but the operation takes none")


def test_a_snowflake_is_accepted_as_a_string_or_as_an_int() -> None:
    """The spec types snowflakes as digit strings; Discord also takes JSON numbers, which is what
    discord.py sends in ``allowed_mentions.roles``. Anything else is still refused."""
    for roles in ([1456074443980800009], ["1456074443980800009"], [0]):
        assert problems("POST", CHANNEL, message(allowed_mentions={"parse": [], "roles": roles})) == [], roles
    for roles in (["12a"], [-1], [1.5], ["012"], [True]):
        found = problems("POST", CHANNEL, message(allowed_mentions={"parse": [], "roles": roles}))
        assert len(found) == 1 and "$.allowed_mentions" in found[0], roles


def test_a_permission_bit_set_is_accepted_as_a_string_of_digits() -> None:
    """Discord's docs serialise permission bit sets as strings; the spec types them as integers
    in requests; discord.py sends strings. Digits only, and no longer than the maximum allows."""
    assert problems("PUT", OVERWRITE, {"type": 1, "allow": "0", "deny": "2048"}) == []
    assert problems("PUT", OVERWRITE, {"type": 1, "allow": 0, "deny": 2048}) == []
    assert problems("PUT", SYNC, [command(default_member_permissions="8")]) == []
    for bad in ("SEND_MESSAGES", "-8", "8.0", "1" * 18):
        found = problems("PUT", SYNC, [command(default_member_permissions=bad)])
        assert len(found) == 1 and "$[0].default_member_permissions" in found[0], bad
    (found,) = problems("PUT", OVERWRITE, {"type": 1, "allow": "send"})
    assert "$.allow" in found


def test_no_other_integer_field_is_relaxed() -> None:
    """The normalisation is for snowflakes and permission bit sets only: an ordinary integer
    field given as a string of digits is still a mismatch."""
    (colour,) = problems("POST", CHANNEL, message(embeds=[{"color": "16777215"}]))
    assert "$.embeds[0].color" in colour
    (command_type,) = problems("PUT", SYNC, [command(type="1")])
    assert "body at $[0].type: '1' is not valid" in command_type


def test_path_and_query_parameters_are_held_to_their_schemas() -> None:
    """Path segments must fit their parameter (a channel id is a snowflake). Query parameters
    must be declared, and booleans are read as Discord reads them (``true``/``True``/``1`` and
    ``false``/``False``/``0``, which discord.py sends as 1 and 0); a bool aiohttp cannot put in
    a URL at all."""
    (channel,) = problems("POST", "/channels/general/messages", message())
    assert "path parameter channel_id = 'general'" in channel
    followup = message()
    for wait in (1, 0, "1", "true", "False"):
        assert problems("POST", FOLLOWUP, followup, {"wait": wait, "with_components": 1}) == [], wait
    (yes,) = problems("POST", FOLLOWUP, followup, {"wait": "yes"})
    assert "query parameter wait = 'yes'" in yes
    (unknown,) = problems("POST", FOLLOWUP, followup, {"wiat": 1})
    assert "query parameter 'wiat' is not in the spec" in unknown
    (raw_bool,) = problems("POST", FOLLOWUP, followup, {"wait": True})
    assert "aiohttp cannot put in a URL" in raw_bool
    assert problems("POST", CALLBACK, {"type": 5, "data": {"flags": 64}}, {"with_response": "1"}) == []


def test_the_most_literal_route_wins() -> None:
    """``@me`` and ``@original`` are literal segments, not ids: a path that has them matches the
    route that names them (where ``{user_id}`` would refuse ``@me`` as a snowflake)."""
    found = spec().operation("GET", "/users/@me")
    assert not isinstance(found, str) and found.template == "/users/@me"
    edit = f"{FOLLOWUP}/messages/@original"
    found = spec().operation("PATCH", edit)
    assert not isinstance(found, str) and found.template.endswith("/messages/@original")
    assert problems("PATCH", edit, {"content": "✅ Confirmed", "components": []}) == []


def test_interaction_callbacks_are_held_to_their_union() -> None:
    """The callback body is a union over the callback types; each must fit its own branch."""
    assert problems("POST", CALLBACK, {"type": 4, "data": {"content": "done", "flags": 64}}) == []
    assert (
        problems("POST", CALLBACK, {"type": 8, "data": {"choices": [{"name": "Raid", "value": "raid"}]}})
        == []
    )
    (unknown_type,) = problems("POST", CALLBACK, {"type": 99})
    assert "body at $: {'type': 99} is not valid under any of the given schemas" in unknown_type
    too_long = {"type": 8, "data": {"choices": [{"name": "x" * 101, "value": "raid"}]}}
    (choice,) = problems("POST", CALLBACK, too_long)
    assert "deepest: at $.data.choices[0].name: " in choice and choice.endswith("is too long")


def test_check_requests_names_every_bad_request() -> None:
    import simcord

    good = simcord.HttpLogEntry("POST", CHANNEL, {}, message(), None)
    bad = simcord.HttpLogEntry("POST", CHANNEL, {}, message(content=5), None)
    lost = simcord.HttpLogEntry("DELETE", "/nowhere", {}, None, None)
    check_requests([good])
    with pytest.raises(SpecMismatch) as caught:
        check_requests([good, bad, lost])
    assert str(caught.value).startswith("2 request(s) do not conform")
    assert "$.content" in str(caught.value) and "DELETE /nowhere" in str(caught.value)


def test_a_simcord_test_whose_bot_sends_a_bad_request_fails(pytester: pytest.Pytester) -> None:
    """The plugin is what holds every simcord test to the spec, so it is tested as pytest runs
    it: of two tests that drive a real discord.py bot through simcord, the one whose bot posts a
    message with a 30-character nonce (Discord allows 25; simcord does not check) fails, naming
    the request and the field; the other passes."""
    pytester.makeconftest(
        """
        import discord
        import pytest

        @pytest.fixture
        def simcord_bot():
            return discord.Client(intents=discord.Intents.default())
        """
    )
    pytester.makepyfile(
        textwrap.dedent(
            """
            from discord.http import Route

            async def post(env, body):
                channel = env.create_guild("g").create_text_channel("general")
                route = Route("POST", "/channels/{channel_id}/messages", channel_id=channel.id)
                await env.bot.http.request(route, json=body)

            async def test_good(simcord_env):
                await post(simcord_env, {"content": "hello", "nonce": "x" * 25})

            async def test_bad(simcord_env):
                await post(simcord_env, {"content": "hello", "nonce": "x" * 30})
            """
        )
    )
    result = pytester.runpytest_inprocess(
        "-p",
        "tests.support.discord_openapi_plugin",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_bad*",
            "*1 request(s) do not conform to Discord's OpenAPI description*",
            "*POST /channels/*/messages (POST /channels/{channel_id}/messages): body at $.nonce: *",
            "*Discord OpenAPI: 4 REST requests on 2 routes checked against openapi.json*",
        ]
    )


async def test_everything_staff_and_gms_do_conforms_route_by_route(sim: Sim) -> None:
    """One session of the bot's whole surface: command sync, autocomplete, every /event command
    (a refused one and an error reply among them), an announcement with a role ping and an embed,
    a cue and a press on it, and a cancel that edits an open cue. Each route the bot uses is
    exercised here and every request conforms; the plugin checks other tests as well, but this
    one does not depend on what they happen to cover."""
    assert await sim.mod.autocomplete(sim.staff, "event start", "definition", "harb")
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.mod.slash(sim.staff, "event pause", run=1)
    await sim.mod.slash(sim.staff, "event resume", run=1)
    await sim.mod.slash(sim.staff, "event status", run=1)
    await sim.mod.slash(sim.staff, "event list")
    assert (await sim.gm.click(sim.gm_cues.last_message, label="Confirm")).acknowledged
    await sim.env.advance_time(60)
    assert (await sim.run(1)).status == "completed"
    await sim.mod.slash(sim.staff, "event retry", run=1)  # refused: nothing to retry
    await sim.mod.slash(sim.staff, "event pause", run=99)  # an error reply: no such run
    await sim.player.slash(sim.general, "event start", definition="raid")  # refused: not staff
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    cancelled = await sim.mod.slash(sim.staff, "event cancel", run=2, reason="storm")
    assert "1 cue message updated" in cancelled.response.content
    # A second run of the event made in the same instant is scheduled a microsecond later
    # (runner/controls.py), and this virtual clock stands still until told otherwise.
    await sim.env.advance_time(1)
    await sim.mod.slash(sim.staff, "event rehearse", definition="raid")
    assert (await sim.gm.click(sim.sandbox.last_message, label="Skip")).acknowledged
    assert (await sim.run(3)).phases[0].steps[1].status == "skipped"

    requests = sim.env.http_requests
    check_requests(requests)
    routes = set()
    for entry in requests:
        found = spec().operation(entry.method, entry.path)
        assert not isinstance(found, str), found
        routes.add(found.route)
    assert routes >= {
        "PUT /applications/{application_id}/guilds/{guild_id}/commands",
        "POST /interactions/{interaction_id}/{interaction_token}/callback",
        "POST /webhooks/{webhook_id}/{webhook_token}",
        "PATCH /webhooks/{webhook_id}/{webhook_token}/messages/@original",
        "POST /channels/{channel_id}/messages",
        "PATCH /channels/{channel_id}/messages/{message_id}",
    }, routes
    callbacks = {r.json["type"] for r in requests if r.path.endswith("/callback")}
    assert callbacks >= {5, 6, 8}, "deferred replies, a deferred button update and autocomplete"
    assert any(r.json.get("embeds") for r in sim.posts_to(sim.announcements)), "an announcement with an embed"
    assert any(r.json.get("components") for r in sim.posts_to(sim.gm_cues)), "a cue with buttons"
