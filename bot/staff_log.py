"""The staff log: run history, posted as it happens to the configured staff log channel.

It reads the run log through its one reader (``runner.views.log_after``, typed
``runner.history.Entry`` lines) rather than listening to this process's own controls, so what it
posts is what happened, whichever process (or the CLI) made it happen: started (by whom), blocked
(by which run), missed, paused after a failure (step, error), resumed, cancelled (reason),
completed, failed, degraded, stalled.

Where it starts, and who posts (the choices where the issue is silent):

* **From now.** The cursor is the newest log id when the poster starts, held in memory only: a
  restart never reposts history. The price is that lines written while no poster was running are
  not posted (they remain in the run log, ``/event status`` and the CLI).
* **Only the process that holds the staff channel's guild.** With shards split across processes,
  Discord delivers each guild to exactly one of them, and only that process has the channel in its
  cache, so only it posts; the others skip. Two processes may briefly both post during a shard
  handover; nothing is ever posted by a process that cannot see the channel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import discord
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.errors import DATABASE_ERRORS
from bot.log_lines import LOGGED_EVENTS, batch_lines, log_line
from bot.ticker import WakeableLoop
from runner.catalog import VersionCache
from runner.history import Entry
from runner.views import RunView, latest_log_id, log_after, run_view
from wiring.config import Config

log = logging.getLogger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()


class StaffLog:
    def __init__(
        self,
        bot: discord.Client,
        config: Config,
        engine: AsyncEngine,
        versions: VersionCache,
        *,
        interval: float,
    ) -> None:
        self.bot = bot
        self.config = config
        self.engine = engine
        self.versions = versions
        self.cursor: int | None = None
        # Runs whose failure to render was logged already (once each, not on every pass).
        self._failed_runs: set[int] = set()
        # Notices being posted (held so the tasks are not collected mid-flight).
        self._notices: set[asyncio.Task[None]] = set()
        self.loop = WakeableLoop(
            self.post_new, interval=interval, name="eventbot-staff-log", before=self._ready
        )

    def start(self) -> None:
        if self.channel_id is not None:
            self.loop.start()

    def cancel(self) -> None:
        self.loop.cancel()

    async def prime(self) -> None:
        """Start from now: the newest log line at start is the last one not to post."""
        if self.channel_id is None:
            return
        try:
            self.cursor = await latest_log_id(self.engine)
        except DATABASE_ERRORS as exc:
            log.warning(
                "staff log: database unreachable at start; will start from the first line read: %s", exc
            )

    def nudge(self) -> None:
        self.loop.nudge()

    def notice(self, text: str) -> None:
        """Post one line that is not in the run log (a part of the bot that failed, such as the
        Events-tab mirror) to the staff channel, if this process can see it; never raises."""
        channel = self.bot.get_channel(self.channel_id) if self.channel_id else None
        if channel is None:
            return
        task = asyncio.create_task(self._post_notice(channel, text))
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    async def _post_notice(self, channel: object, text: str) -> None:
        try:
            await channel.send(text[:2000], allowed_mentions=NO_MENTIONS)  # type: ignore[attr-defined]
        except discord.HTTPException as exc:
            log.warning("staff log: could not post a notice in channel %s: %s", self.channel_id, exc)

    @property
    def channel_id(self) -> int | None:
        alias = self.config.staff_log_channel
        return self.config.channel_id(alias) if alias else None

    async def _ready(self) -> None:
        await self.bot.wait_until_ready()

    async def post_new(self) -> float:
        interval = self.loop.interval
        try:
            if self.cursor is None:
                self.cursor = await latest_log_id(self.engine)
                return interval
            entries = await log_after(self.engine, self.cursor)
        except DATABASE_ERRORS as exc:
            log.debug("staff log: database unreachable: %s", exc)
            return interval
        if not entries:
            return interval
        channel = self.bot.get_channel(self.channel_id) if self.channel_id else None
        if channel is None:
            # Not this process's guild (or the channel is gone): another process posts, or no one.
            self.cursor = entries[-1].id
            return interval
        try:
            lines = await self._lines(entries)
        except DATABASE_ERRORS as exc:
            log.debug("staff log: database unreachable: %s", exc)
            return interval
        for text in batch_lines(lines):
            try:
                await channel.send(text, allowed_mentions=NO_MENTIONS)  # type: ignore[union-attr]
            except discord.HTTPException as exc:
                # The history is in the database; a post Discord refused is not worth a retry loop.
                log.warning("staff log: could not post in channel %s: %s", self.channel_id, exc)
                break
        self.cursor = entries[-1].id
        return 0.0 if len(entries) >= 100 else interval

    async def _lines(self, entries: Sequence[Entry]) -> list[str]:
        """One line per entry staff should see. One run that cannot be read or rendered costs
        only its own detail (its lines name it by id), logged once, never the other runs' lines:
        the cursor must move past it, or nothing would ever be posted again."""
        runs: dict[int, RunView | None] = {}
        lines = []
        for entry in entries:
            if not isinstance(entry.event, LOGGED_EVENTS):
                continue  # not worth reading its run for (a 500-scope start writes 500 of these)
            run_id = entry.run_id
            if run_id not in runs:
                runs[run_id] = await self._run(run_id)
            try:
                line = log_line(entry, runs[run_id])
            except Exception:
                self._log_once(run_id, "staff log: cannot render log line %s of run %s", entry.id, run_id)
                line = log_line(entry, None)
            if line is not None:
                lines.append(line)
        return lines

    async def _run(self, run_id: int) -> RunView | None:
        try:
            return await run_view(self.engine, run_id, self.versions)
        except DATABASE_ERRORS:
            raise
        except Exception:
            self._log_once(run_id, "staff log: cannot read run %s; its lines name it by id only", run_id)
            return None

    def _log_once(self, run_id: int, message: str, *args: object) -> None:
        if run_id in self._failed_runs:
            return
        self._failed_runs.add(run_id)
        log.exception(message, *args, extra={"run_id": run_id})
