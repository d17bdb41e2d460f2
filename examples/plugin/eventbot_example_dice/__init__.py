"""``example.roll``: roll dice and announce the result in a channel.

A whole eventbot action plugin. The entry point (``pyproject.toml``, group ``eventbot.actions``)
names ``register``, which eventbot calls with a staging object when it builds its registry; the
action posts through ``staging.delivery``, so the bot sends it to Discord and a rehearsal prints
it, and ``/event start``'s preflight (``envelope.verify``) checks the channel without posting.

The roll is seeded with the step's idempotency key: a retry of the step, or its repeat after a
crash, rolls the same numbers and posts the same message, which the delivery sends once.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from actions.delivery import Announcement, DeliveryError
from actions.plugins import PluginStaging
from runner.registry import Action, Envelope
from runner.states import AnswerKey


class RollParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str = Field(description="the channel alias from the config to announce the roll in")
    dice: int = Field(default=1, ge=1, le=20, description="how many dice")
    sides: int = Field(default=6, ge=2, le=1000, description="the sides of each die")
    title: str = Field(default="The dice are cast", max_length=200, description="the line above the roll")


def roll(key: str, dice: int, sides: int) -> list[int]:
    """The same dice for the same idempotency key, whoever rolls them and however often."""
    # A game's dice, not a secret: seeded so that a retry rolls what the first attempt rolled.
    chance = random.Random(key)
    return [chance.randint(1, sides) for _ in range(dice)]


def roll_action(staging: PluginStaging) -> Action[RollParams]:
    delivery, describe = staging.delivery, staging.describe

    async def perform(envelope: Envelope, params: RollParams) -> dict[str, Any]:
        faces = roll(envelope.idempotency_key, params.dice, params.sides)
        shown = " + ".join(str(f) for f in faces) + (f" = {sum(faces)}" if len(faces) > 1 else "")
        request = Announcement(
            channel=params.channel,
            content=f"🎲 {params.title}: {params.dice}d{params.sides} → {shown}",
            embed=None,
            ping_role=None,
            idempotency_key=envelope.idempotency_key,
            run_id=envelope.run_id,
            step_id=envelope.step_id,
            context=None if envelope.verify else await describe(envelope.run_id, envelope.step_id),
        )
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
            posted = await delivery.announce(request)
        except DeliveryError as exc:
            return {AnswerKey.OK: False, AnswerKey.RETRY: exc.transient, AnswerKey.ERROR: str(exc)}
        return {AnswerKey.OK: True, AnswerKey.OUTPUT: {"rolled": faces, "posted": posted.as_dict()}}

    return Action(
        id="example.roll",
        label="Roll dice",
        # It posts a message (notify); a moderator can delete it by hand (manual).
        risk="notify",
        reversible="manual",
        version=1,
        budget_ms=10_000,
        params_model=RollParams,
        perform=perform,
        description="Rolls dice and announces the result in a channel.",
    )


def register(staging: PluginStaging) -> None:
    """The entry point: eventbot calls it with the staging its actions go into."""
    staging.register([roll_action(staging)])
