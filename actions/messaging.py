"""``discord.announce`` and ``gm.cue``: the two actions that put messages in front of people.

Both are written against ``actions.delivery.Delivery``; which delivery (Discord, console,
recording) is decided by whoever builds the registry. The placeholders of ``runner.placeholders``
are filled in per run when the message is sent: ``{scope}`` (so one invasion definition can
announce "The invasion of {scope} begins" per world), ``{title}``, and ``{start}`` /
``{start_relative}`` as Discord timestamps (``<t:…:F>``, ``<t:…:R>``), which every reader sees in
their own time zone.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from actions import limits
from actions.delivery import Announcement, Cue, Delivery, DeliveryError, Embed, EmbedField, Posted
from runner import placeholders
from runner.definitions.signup import SignupDefinition
from runner.registry import Action, Envelope
from runner.states import AWAIT_HUMAN, AnswerKey
from runner.views import StepContext

Describe = Callable[[int, int], Awaitable[StepContext | None]]

CHANNEL_REF = r"^(#?[a-z0-9][a-z0-9_-]{0,99}|[0-9]{15,21})$"
_CHANNEL_REF = re.compile(CHANNEL_REF.removeprefix("^").removesuffix("$"), re.ASCII)
# An author is told what a pattern allows in words, never shown the pattern.
CHANNEL_RULE = (
    "name a channel alias from the config (lower case letters, digits, - and _, starting with a "
    "letter or a digit, at most 100 characters; a leading # is allowed) or a channel id (15 to 21 "
    "digits)"
)
IMAGE_URL = re.compile(r"https://\S+")
# A role is named by its alias in the config's ``roles``, never by a raw id: only an alias can be
# held to the config's policy (which roles exist, which announcements may ping). ASCII only, so
# no Unicode digit ("²") can pass for an id anywhere later.
ROLE_ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}", re.ASCII)


# The longest a Discord timestamp of any storable instant renders to, for length checks made
# before the run (and so its start) exists.
# How long a post to Discord may take before the step is retried. It bounds how long a run whose
# process died mid-send waits for another process (a step's lease is this plus the lease margin,
# the run's a run lease more): 10 s keeps a takeover within 20 s of the kill (bench/failover.py),
# while a post waiting out a rate limit of a few seconds still fits; one cut off is retried with
# the same nonce, which Discord answers with the message already posted.
DISCORD_BUDGET_MS = 10_000
_WIDEST_TIMESTAMP = "<t:99999999999:F>"


def discord_timestamp(moment: dt.datetime, style: str) -> str:
    """``<t:EPOCH:STYLE>`` for a naive-UTC instant: Discord shows it in each reader's zone."""
    return f"<t:{int(moment.replace(tzinfo=dt.UTC).timestamp())}:{style}>"


def placeholder_values(scope: str, context: StepContext | None = None) -> dict[str, str]:
    """What each placeholder becomes for this run: all of them once the step's context is
    known; before that (checking a definition) only ``{scope}``, the rest at their widest."""
    if context is None or context.starts_at is None:
        widest = {"start": _WIDEST_TIMESTAMP, "start_relative": _WIDEST_TIMESTAMP, **_WIDEST_ATTENDEES}
        return {"scope": scope, **widest, **({"title": context.event_title} if context else {})}
    attendees = context.attendees or ()
    return {
        "scope": scope,
        "title": context.event_title,
        "start": discord_timestamp(context.starts_at, "F"),
        "start_relative": discord_timestamp(context.starts_at, "R"),
        "attendees": attendee_mentions(attendees),
        "attendee_count": str(len(attendees)),
    }


# ``{attendees}`` is at most this long (mentions, then "and N more"), so a message holding it is
# checked against Discord's limits before anyone has signed up.
ATTENDEES_TEXT_MAX = 900
_WIDEST_ATTENDEES = {"attendees": "x" * ATTENDEES_TEXT_MAX, "attendee_count": "1000"}


def attendee_mentions(member_ids: Sequence[str]) -> str:
    """``<@1>, <@2> and 3 more``: as many mentions as fit ``ATTENDEES_TEXT_MAX``; "nobody yet"
    when the list is empty."""
    if not member_ids:
        return "nobody yet"
    mentions = [f"<@{member_id}>" for member_id in member_ids]
    everyone = ", ".join(mentions)
    if len(everyone) <= ATTENDEES_TEXT_MAX:
        return everyone
    room = ATTENDEES_TEXT_MAX - len(f" and {len(mentions)} more")
    shown: list[str] = []
    length = 0
    for mention in mentions:
        length += len(mention) + (2 if shown else 0)
        if length > room:
            break
        shown.append(mention)
    return f"{', '.join(shown)} and {len(mentions) - len(shown)} more"


def render(text: str | None, scope: str, context: StepContext | None = None) -> str | None:
    """The placeholders filled in, ``{{`` / ``}}`` unescaped (the rule is ``runner.placeholders``)."""
    return None if text is None else placeholders.fill(text, placeholder_values(scope, context))


def _placeholders_known(value: str | None) -> str | None:
    if value is not None:
        problem = placeholders.problem(value)
        if problem:
            raise ValueError(problem)
    return value


def _channel_ref(value: str | None) -> str | None:
    if value is None or _CHANNEL_REF.fullmatch(value):
        return value
    raise ValueError(f"{value[:40]!r} is not a channel: {CHANNEL_RULE}")


def _image_url(value: str | None) -> str | None:
    if value is None or IMAGE_URL.fullmatch(value):
        return value
    raise ValueError(f"{value[:40]!r} is not an image address: write its https:// link, with no spaces")


def _role_alias(value: str | None) -> str | None:
    if value is None:
        return value
    if not ROLE_ALIAS.fullmatch(value):
        raise ValueError(
            f"{value[:40]!r} is not a role alias (letters, digits, - and _, starting with a letter "
            "or a digit, at most 100 characters, as in the config's roles)"
        )
    if value.isascii() and value.isdigit():
        raise ValueError(
            f"{value!r} is a role id; name the role by its alias from the config's roles, so the "
            "config decides whom events may ping"
        )
    return value


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbedFieldParams(_Params):
    name: str = Field(min_length=1, max_length=limits.EMBED_FIELD_NAME_MAX)
    value: str = Field(min_length=1, max_length=limits.EMBED_FIELD_VALUE_MAX)
    inline: bool = False

    _placeholders = field_validator("name", "value")(_placeholders_known)


class EmbedParams(_Params):
    title: str | None = Field(default=None, max_length=limits.EMBED_TITLE_MAX)
    description: str | None = Field(default=None, max_length=limits.EMBED_DESCRIPTION_MAX)
    colour: int | None = Field(default=None, ge=0, le=0xFFFFFF)
    image: str | None = Field(default=None, max_length=2000)
    footer: str | None = Field(default=None, max_length=limits.EMBED_FOOTER_MAX)
    fields: list[EmbedFieldParams] = Field(default_factory=list, max_length=limits.EMBED_FIELDS_MAX)

    _placeholders = field_validator("title", "description", "footer")(_placeholders_known)
    _image = field_validator("image")(_image_url)

    @field_validator("colour", mode="before")
    @classmethod
    def _hex_colour(cls, value: Any) -> Any:
        if isinstance(value, str):
            match = re.fullmatch(r"#?([0-9a-fA-F]{6})", value.strip())
            if not match:
                raise ValueError(
                    f'colour {value[:40]!r} is not a colour: write it as "#RRGGBB", six hexadecimal '
                    'digits (0-9 and A-F, e.g. "#6A3FB5"), or as a number from 0 to 16777215'
                )
            return int(match.group(1), 16)
        return value

    @model_validator(mode="after")
    def _not_empty_and_in_total(self) -> EmbedParams:
        if not (self.title or self.description or self.fields or self.image):
            raise ValueError("an embed needs a title, a description, fields or an image")
        if self.total_length() > limits.EMBED_TOTAL_MAX:
            raise ValueError(
                f"embed text totals {self.total_length()} characters; Discord allows {limits.EMBED_TOTAL_MAX}"
            )
        return self

    def total_length(self, scope: str = "") -> int:
        parts = [self.title, self.description, self.footer]
        parts += [f.name for f in self.fields] + [f.value for f in self.fields]
        return sum(len(render(p, scope) or "") for p in parts)

    def build(self, scope: str, context: StepContext | None = None) -> Embed:
        return Embed(
            title=render(self.title, scope, context),
            description=render(self.description, scope, context),
            colour=self.colour,
            image_url=self.image,
            footer=render(self.footer, scope, context),
            fields=tuple(
                EmbedField(
                    render(f.name, scope, context) or "", render(f.value, scope, context) or "", f.inline
                )
                for f in self.fields
            ),
        )


class AnnounceParams(_Params):
    channel: str = Field(description="a channel alias from config, or a channel id")
    content: str | None = Field(default=None, min_length=1, max_length=limits.CONTENT_MAX)
    embed: EmbedParams | None = None
    ping_role: str | None = Field(default=None, description="a role alias from config")

    _placeholders = field_validator("content")(_placeholders_known)
    _ping_role = field_validator("ping_role")(_role_alias)
    _channel = field_validator("channel")(_channel_ref)

    @model_validator(mode="after")
    def _something_to_say(self) -> AnnounceParams:
        if self.content is None and self.embed is None:
            raise ValueError("an announcement needs content, an embed, or both")
        if (
            self.ping_role
            and self.content
            and len(self.content) + limits.ROLE_MENTION_RESERVE > limits.CONTENT_MAX
        ):
            raise ValueError(
                f"content is {len(self.content)} characters; with the role ping it must stay under "
                f"{limits.CONTENT_MAX - limits.ROLE_MENTION_RESERVE}"
            )
        return self

    def problems_for_scope(self, scope: str) -> list[tuple[str, str]]:
        """Limits checked again with ``{scope}`` replaced, for each scope the event runs in."""
        problems = []
        if self.content and len(render(self.content, scope) or "") > limits.CONTENT_MAX:
            problems.append(
                ("content", f"in scope {scope!r} the content exceeds {limits.CONTENT_MAX} characters")
            )
        if self.embed and self.embed.total_length(scope) > limits.EMBED_TOTAL_MAX:
            problems.append(
                ("embed", f"in scope {scope!r} the embed exceeds {limits.EMBED_TOTAL_MAX} characters")
            )
        return problems


class CueParams(_Params):
    instructions: str = Field(min_length=1, max_length=limits.EMBED_DESCRIPTION_MAX)
    title: str | None = Field(default=None, max_length=limits.EMBED_TITLE_MAX)
    channel: str | None = Field(default=None, description="defaults to the configured GM channel")
    ping_role: str | None = Field(default=None, description="a role alias from config")
    ping: Literal["attendees"] | None = Field(
        default=None, description="attendees: mention and ping the run's confirmed attendees"
    )
    attendance: bool = Field(default=False, description="a Take attendance button: the GM marks who came")

    _placeholders = field_validator("instructions", "title")(_placeholders_known)
    _ping_role = field_validator("ping_role")(_role_alias)
    _channel = field_validator("channel")(_channel_ref)

    def signup_problems(self, signup: SignupDefinition | None) -> list[tuple[str, str]]:
        """What the event's ``signup:`` must give this cue: attendees to ping."""
        problems = []
        if self.ping == "attendees" and signup is None:
            problems.append(
                ("params.ping", "ping: attendees pings the run's sign-ups; this event has no signup:")
            )
        if self.attendance and signup is None:
            problems.append(
                ("params.attendance", "attendance marks the run's sign-ups; this event has no signup:")
            )
        return problems

    def problems_for_scope(self, scope: str) -> list[tuple[str, str]]:
        if len(render(self.instructions, scope) or "") > limits.EMBED_DESCRIPTION_MAX:
            return [
                (
                    "instructions",
                    f"in scope {scope!r} the instructions exceed {limits.EMBED_DESCRIPTION_MAX} characters",
                )
            ]
        return []


def announce_action(
    delivery: Delivery, describe: Describe, *, budget_ms: int = DISCORD_BUDGET_MS
) -> Action[AnnounceParams]:
    async def perform(envelope: Envelope, params: AnnounceParams) -> dict[str, Any]:
        context = None if envelope.verify else await describe(envelope.run_id, envelope.step_id)
        request = Announcement(
            channel=params.channel,
            content=render(params.content, envelope.scope, context),
            embed=params.embed.build(envelope.scope, context) if params.embed else None,
            ping_role=params.ping_role,
            idempotency_key=envelope.idempotency_key,
            run_id=envelope.run_id,
            step_id=envelope.step_id,
            context=context,
        )
        return await _deliver(envelope, request, delivery, delivery.announce, park=False)

    return Action(
        id="discord.announce",
        label="Announce in a channel",
        risk="notify",
        reversible="manual",
        version=1,
        budget_ms=budget_ms,
        params_model=AnnounceParams,
        perform=perform,
        description="Posts a message (text and/or embed, optional role ping) to a community channel.",
    )


def cue_action(
    delivery: Delivery, describe: Describe, *, budget_ms: int = DISCORD_BUDGET_MS
) -> Action[CueParams]:
    async def perform(envelope: Envelope, params: CueParams) -> dict[str, Any]:
        context = None if envelope.verify else await describe(envelope.run_id, envelope.step_id)
        title = params.title or (context.step_label if context and context.step_label else "GM cue")
        request = Cue(
            channel=params.channel,
            title=render(title, envelope.scope, context) or "GM cue",
            instructions=render(params.instructions, envelope.scope, context) or "",
            ping_role=params.ping_role,
            idempotency_key=envelope.idempotency_key,
            run_id=envelope.run_id,
            step_id=envelope.step_id,
            context=context,
            ping_members=(context.attendees or ()) if context and params.ping == "attendees" else (),
            attendance=params.attendance,
        )
        # Parked once posted: the step waits, with no lease, for a GM to confirm or skip it.
        return await _deliver(envelope, request, delivery, delivery.post_cue, park=True)

    return Action(
        id="gm.cue",
        label="Cue a game master",
        risk="notify",
        reversible="none",
        version=1,
        budget_ms=budget_ms,
        params_model=CueParams,
        perform=perform,
        description="Posts instructions to the GM channel with Confirm and Skip; the run waits for a GM.",
    )


async def _deliver(
    envelope: Envelope,
    request: Any,
    delivery: Delivery,
    send: Callable[[Any], Awaitable[Posted]],
    *,
    park: bool,
) -> dict[str, Any]:
    """Verify (check without sending) or send, and answer in the runner's protocol."""
    if envelope.verify:
        problems = await delivery.check(request)
        if problems:
            return {
                AnswerKey.OK: False,
                AnswerKey.RETRY: False,
                AnswerKey.ERROR: "; ".join(problems),
                AnswerKey.PROBLEMS: problems,
            }
        return {AnswerKey.OK: True}
    try:
        posted = await send(request)
    except DeliveryError as exc:
        return {AnswerKey.OK: False, AnswerKey.RETRY: exc.transient, AnswerKey.ERROR: str(exc)}
    answer: dict[str, Any] = {AnswerKey.OK: True, AnswerKey.OUTPUT: {"posted": posted.as_dict()}}
    if park:
        answer[AnswerKey.AWAIT] = AWAIT_HUMAN
    return answer
