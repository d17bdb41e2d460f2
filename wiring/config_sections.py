"""The config's sections (``announce``, ``discord_events``, ``retention``), each a small model
with its bounds; ``wiring.config.Config`` holds them.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from runner.definitions.durations import duration_seconds

# A number as YAML or an environment variable writes it.
NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AnnounceSettings(Strict):
    # Role aliases (from ``roles``) that an announcement may ping; any other mention is inert.
    allowed_ping_roles: list[str] = Field(default_factory=list)
    # Whether ``@everyone`` / ``@here`` written in event text actually ping. Off by default:
    # a typo in an event definition must not ping a whole community.
    allow_everyone: bool = False


# Discord allows 100 scheduled or active events per guild; the mirror stays well inside that, so
# staff can still create events of their own by hand.
MAX_LISTED_MOST = 90


# Further ahead than this and a week's cron fills the Events tab with occurrences nobody plans for.
HORIZON_MAX_SECONDS = 90 * 86400.0


def _horizon(value: object) -> float:
    explained = "must be a duration such as 7d, 36h or 90m (at most 90d)"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(explained)
    try:
        seconds = duration_seconds(value)
    except (TypeError, ValueError):
        raise ValueError(explained) from None
    if not 0 < seconds <= HORIZON_MAX_SECONDS or not math.isfinite(seconds):
        raise ValueError(explained)
    return float(seconds)


class DiscordEventSettings(Strict):
    # Whether definitions that do not say (no ``discord_event:``) are mirrored.
    mirror: bool = False
    # How far ahead occurrences are listed in the server's Events tab.
    horizon: Annotated[float, BeforeValidator(_horizon)] = 7 * 86400.0
    # The most occurrences listed at once, nearest first.
    max_listed: int = Field(default=50, ge=1, le=MAX_LISTED_MOST)


# Retention: longer than ten years is "keep everything", which 0 already says; a batch is the
# most rows one statement deletes (each its own transaction), so it bounds how long a pass holds
# a lock: below 10 a backlog never drains, above 5,000 a pass could hold a due step up.
KEEP_DAYS_MAX = 3650.0
RETENTION_BATCH_MIN, RETENTION_BATCH_MAX = 10, 5000


def _keep_days(value: object) -> float:
    explained = f"must be a number of days from 0 to {KEEP_DAYS_MAX:g} (0 or null: keep everything)"
    if value is None:
        return 0.0
    if isinstance(value, str) and NUMBER.fullmatch(value.strip()):
        value = float(value.strip())
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(explained)
    if not (0 <= value <= KEEP_DAYS_MAX) or not math.isfinite(value):
        raise ValueError(explained)
    return float(value)


class RetentionSettings(Strict):
    # The run log, steps and reminders of a run that ended longer ago than this are pruned; the
    # run itself stays, with a summary (who started it, how it ended, when). 0 or null: never.
    keep_run_log_days: Annotated[float, BeforeValidator(_keep_days)] = 30.0
    # The most rows one delete statement removes; a pass runs a handful of them.
    batch: int = Field(default=500, ge=RETENTION_BATCH_MIN, le=RETENTION_BATCH_MAX)

    @property
    def keep_seconds(self) -> float:
        return self.keep_run_log_days * 86400.0
