"""The staff log: run history, posted as it happens to the configured staff log channel.

It reads the run log through its one follower (``runner.views.log_followed``, typed
``runner.history.Entry`` lines; ``runner.sql.run_log.LogFollower`` delivers a line committed
after a higher id was read, once) rather than listening to this process's own controls, so what it
posts is what happened, whichever process (or the CLI) made it happen: every control and who
pressed it (start, pause, resume, cancel with its reason, retry, ``/event skip``), every cue a
GM confirmed or skipped, every step that failed or is being retried and why, every run missed,
degraded or stalled, and a reminder that did not go out. The words are ``bot.cogs.staff_log._lines``'s.

Each line carries a jump link to the message it concerns: a cue action its cue, a step's
failure the message the step posted, if it posted one; any other line the run's live message
(``bridge.live.live_message_of``), or, while the run has none, the last message the run posted.
A burst (more than ``bot.cogs.staff_log._bursts.BURST`` lines of one kind for one event in one pass) is one
summary line. Every message takes a slot of the channel's budget first (``bot.channel_budget``:
the channel is shared with the live run messages).

Each line once, and where it starts (the choices where the issue is silent):

* **From now, at every start.** The follower starts at the newest log lines when the poster
  starts (a line in flight then is still posted): a restart never reposts history. The price is that lines written while no poster was running
  (the bot was down) are not posted; they remain in the run log, ``/event status`` and the CLI.
* **One poster among processes, and a takeover starts where the last one stopped.** With a
  ``lease`` (``bot.work_lease``), only the process holding the ``staff-log`` lease posts. The
  holder records its follower's place (the floor, and the lines it posted above it) with each
  message sent; a process
  taking the lease over (the holder stopped, died, or gave it back on shutdown) starts exactly
  there, so a failover or a rolling restart loses no line and posts none twice. A lease that ran
  out more than ``RESUME_WITHIN`` ago is old history: the taker starts from now, as above.
* **A pass that fails half-way posts the rest later, never again what went out.** A line is
  delivered to the follower only once its message went out; the lines of a message Discord
  answered but refused (4xx) are dropped with a warning, never retried; a message that failed
  for want of Discord (5xx, rate limit, the network) is tried again on the next pass, at most
  ``TRIES`` times, with the same nonce (Discord then answers an earlier post that did arrive
  instead of posting it again). The follower remembers the lines posted, so no pass reads them
  again.
* **A new run's lines wait a moment for its live message.** The live message is posted by its
  own loop just after the run starts; a line of a run that started and has no live message yet
  waits for it (``bridge.live.LiveMessagePosted`` wakes this loop when one is posted) for ``LINK_WAIT`` seconds
  at most, then links the run's latest post instead (a run past the live messages' cap). The
  lines after it wait too, so the channel keeps the run log's order.
* **"Paused by" is posted when the pause is recorded**, and says what a pause does: nothing new
  starts, and a step already under way (dispatched when the pause came) is not recalled but
  finishes, its result recorded as usual (``bot.cogs.staff_log._lines.PAUSE_MEANS``).
* **Only the process that holds the staff channel's guild.** With shards split across processes,
  Discord delivers each guild to exactly one of them, and only that process has the channel in its
  cache, so only it posts; the others skip. Two processes may briefly both post during a shard
  handover; nothing is ever posted by a process that cannot see the channel.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import replace

import aiohttp
import discord

from bot.background import Background, LeasedLoop
from bot.cogs.staff_log._bursts import summarise
from bot.cogs.staff_log._lines import Line, Link, batch, fold, latest_post, logged, word
from bot.errors import DATABASE_ERRORS
from bot.work_lease import WorkLease
from bridge.exclusive import Taken
from bridge.live import LiveMessagePosted, live_message_of
from runner.bus import LogGrew, StaffNotice
from runner.history import Entry
from runner.sql.run_log import LogFollower
from runner.views import RunView, follow_log_from_now, log_followed, run_view

log = logging.getLogger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()
# The run log is read up to this many lines a pass: a burst (500 runs starting write several
# lines each) is read, and summed up, in one pass.
PASS_MAX = 5000
# Passes a message that failed for want of Discord is tried in before its lines are dropped.
TRIES = 3
# How long a line waits for its run's live message to be posted, so it can link it, and how
# often it looks again meanwhile (``bot.cogs.live._loop`` nudges the staff log when it posts one).
LINK_WAIT = 15.0
LINK_RETRY = 1.0
# Failures that say nothing about the message itself: it may go through next time.
TRANSIENT = (aiohttp.ClientError, OSError, asyncio.TimeoutError)
# A takeover resumes from the last holder's place if its lease ran out at most this long ago.
RESUME_WITHIN = dt.timedelta(minutes=10)


def transient(exc: BaseException) -> bool:
    if isinstance(exc, discord.HTTPException):
        return exc.status >= 500 or exc.status == 429
    return isinstance(exc, TRANSIENT)


def nonce_of(entry_ids: Sequence[int]) -> str:
    """The same message (the same lines) gets the same nonce on every try (at most 25 chars)."""
    digest = hashlib.blake2b(",".join(map(str, entry_ids)).encode(), digest_size=8).hexdigest()
    return f"log{digest}"


class StaffLog(LeasedLoop):
    work = "staff-log"
    # The run log grew; a live message went up (a new run's waiting lines can link it).
    wakes_on = (LogGrew, LiveMessagePosted)

    def __init__(self, kit: Background, *, interval: float, lease: WorkLease | None = None) -> None:
        # Without a lease (a test's bare client), this process is the only poster.
        super().__init__(kit, lease=lease, interval=interval)
        # Where this process is in the run log (None: not known, the next pass starts it).
        self.follower: LogFollower | None = None
        # Passes the first unsent message has failed in, by its first entry id.
        self._tries: dict[int, int] = {}
        # Runs whose failure to render was logged already (once each, not on every pass).
        self._failed_runs: set[int] = set()
        # Notices being posted (held so the tasks are not collected mid-flight).
        self._notices: set[asyncio.Task[None]] = set()
        self._notice_subscription = kit.bus.subscribe(lambda event: self.notice(event.text), {StaffNotice})

    def enabled(self) -> bool:
        return self.channel_id is not None

    async def stop(self) -> None:
        self._notice_subscription.unsubscribe()
        await super().stop()

    async def pass_once(self) -> float:
        return await self.post_new()

    async def prime(self) -> None:
        """Start from now: the newest log line at start is the last one not to post."""
        if self.channel_id is None:
            return
        try:
            if self.lease is None:
                self.follower = await follow_log_from_now(self.kit.engine)
            elif (taken := await self.lease.take()) is not None:
                await self._resume(taken)
        except DATABASE_ERRORS as exc:
            log.warning(
                "staff log: database unreachable at start; will start from the first line read: %s", exc
            )

    def notice(self, text: str) -> None:
        """Post one line that is not in the run log (a part of the bot that failed, such as the
        Events-tab mirror) to the staff channel, if this process can see it; never raises."""
        channel = self.kit.client.get_channel(self.channel_id) if self.channel_id else None
        if channel is None:
            return
        task = asyncio.create_task(self._post_notice(channel, text))
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    async def _post_notice(self, channel: object, text: str) -> None:
        try:
            await self._budget(channel)
            await channel.send(text[:2000], allowed_mentions=NO_MENTIONS)  # type: ignore[attr-defined]
        except discord.HTTPException as exc:
            log.warning("staff log: could not post a notice in channel %s: %s", self.channel_id, exc)

    async def _budget(self, channel: object) -> None:
        await self.kit.budget.take(channel.id)  # type: ignore[attr-defined]

    @property
    def channel_id(self) -> int | None:
        alias = self.kit.config.staff_log_channel
        return self.kit.config.channel_id(alias) if alias else None

    async def _resume(self, taken: Taken) -> None:
        """This process has just taken the lease: start where the last holder got to (or, when
        there was none lately, from now), and record that start at once."""
        assert self.lease is not None
        recent = taken.lapsed_at is None or self._now() - taken.lapsed_at <= RESUME_WITHIN
        if taken.position is not None and recent:
            self.follower = LogFollower(taken.position, taken.done)
        else:
            self.follower = await follow_log_from_now(self.kit.engine)
        self._tries = {}
        await self._save()

    async def _save(self) -> bool:
        """Record where the follower is in the lease; False when the lease is no longer ours."""
        assert self.lease is not None and self.follower is not None
        return await self.lease.save(self.follower.floor, self.follower.done)

    async def post_new(self) -> float:
        if self.lease is None:
            return await self._post_new()
        if self.kit.client.get_channel(self.channel_id or 0) is None:
            return self.loop.interval  # cannot post here: leave the work to a process that can
        try:
            taken = await self.lease.take()
            if taken is not None and taken.fresh:
                await self._resume(taken)
        except DATABASE_ERRORS as exc:
            log.debug("staff log: database unreachable: %s", exc)
            self.lease.forget()
            taken = None
        if taken is None:
            # Another process posts; whatever this one knew is stale when it takes over.
            self.follower = None
            return self.loop.interval
        delay = await self._post_new()
        if self.follower is not None and not await self._save():
            self.follower = None
        return delay

    async def _post_new(self) -> float:
        interval = self.loop.interval
        try:
            if self.follower is None:
                self.follower = await follow_log_from_now(self.kit.engine)
                return interval
            follower = self.follower
            entries, more = await log_followed(self.kit.engine, follower, limit=PASS_MAX)
        except DATABASE_ERRORS as exc:
            log.debug("staff log: database unreachable: %s", exc)
            return interval
        if not entries:
            return interval
        channel = self.kit.client.get_channel(self.channel_id) if self.channel_id else None
        if channel is None:
            # Not this process's guild (or the channel is gone): another process posts, or no one.
            follower.delivered(e.id for e in entries)
            return interval
        try:
            ready, waiting = await self._lines(entries)
        except DATABASE_ERRORS as exc:
            log.debug("staff log: database unreachable: %s", exc)
            return interval
        guild_id = self.kit.config.guild_id or getattr(getattr(channel, "guild", None), "id", 0)
        dealt = await self._post(channel, ready, guild_id)
        unsent = {i for line in [*ready[dealt:], *waiting] for i in line.entry_ids}
        # Every line read but those still to post is dealt with (posted, or not worth a line).
        follower.delivered(e.id for e in entries if e.id not in unsent)
        if unsent:
            # A line waiting for its link: the live messages' loop nudges this one when it posts
            # one; the short delay bounds the wait if it does not.
            return min(interval, LINK_RETRY) if waiting else interval
        return 0.0 if more else interval

    async def _post(self, channel: object, lines: Sequence[Line], guild_id: object) -> int:
        """Post the lines, a message at a time; answers how many were dealt with (posted, or
        refused for good): the lines from there on are tried again next pass."""
        texts = [
            f"{line.text} · {line.link.jump(guild_id)}" if line.link else line.text  # type: ignore[arg-type]
            for line in lines
        ]
        for text, span in batch(texts):
            ids = sorted({i for index in span for i in lines[index].entry_ids})
            try:
                await self._budget(channel)
                await channel.send(text, allowed_mentions=NO_MENTIONS, nonce=nonce_of(ids))  # type: ignore[attr-defined]
            except (discord.HTTPException, *TRANSIENT) as exc:
                tries = self._tries.get(ids[0], 0) + 1
                if transient(exc) and tries < TRIES:
                    self._tries = {ids[0]: tries}
                    log.warning(
                        "staff log: could not post in channel %s (will try again): %s", self.channel_id, exc
                    )
                    return span.start
                # Refused for good: these lines are not posted (never twice); the history keeps them.
                log.warning("staff log: could not post in channel %s: %s", self.channel_id, exc)
                if isinstance(exc, (discord.Forbidden, discord.NotFound)):
                    return len(lines)  # the channel itself refuses: the rest would fare no better
            assert self.follower is not None
            self.follower.delivered(ids)
            # Recorded with each message, so a process taking over never posts these again; a
            # lease lost meanwhile (this pass outlasted it) stops the pass: the taker posts on.
            if self.lease is not None and not await self._save():
                return span.stop
        self._tries = {}
        return len(lines)

    async def _lines(self, entries: Sequence[Entry]) -> tuple[list[Line], list[Line]]:
        """The lines staff should see, folded, bursts summed up, each with its link: those to post
        now, and those that wait for their run's live message (and every line after them, so the
        order holds). One run that cannot be read or rendered costs only its own detail (its lines
        name it by id), logged once, never the other runs' lines: its lines must be delivered, or
        nothing would ever be posted again."""
        runs: dict[int, RunView | None] = {}
        worded = []
        for entry in entries:
            if not logged(entry.event):
                continue  # not worth reading its run for (a 500-scope start writes 500 of these)
            run_id = entry.run_id
            if run_id not in runs:
                runs[run_id] = await self._run(run_id)
            try:
                line = word(entry, runs[run_id])
            except Exception:
                self._log_once(run_id, "staff log: cannot render log line %s of run %s", entry.id, run_id)
                line = word(entry, None)
            if line is not None:
                worded.append((entry, line))
        lines = summarise(fold(worded))
        ready: list[Line] = []
        for index, line in enumerate(lines):
            linked = await self._linked(line, runs.get(line.run_id))
            if linked is None:
                return ready, lines[index:]
            ready.append(linked)
        return ready, []

    async def _linked(self, line: Line, run: RunView | None) -> Line | None:
        """A line without a message of its own step links to its run's live message, or else to
        the last message the run posted; ``None`` while it waits for the live message of a run
        that has just started (``LINK_WAIT`` at most: a run past the live messages' cap may not
        get one soon)."""
        if line.link is not None or not line.linked:
            return line
        live = await live_message_of(self.kit.engine, line.run_id)
        if live is not None:
            return replace(line, link=Link(live[0], live[1], "live message"))
        if self._live_expected(line, run):
            return None
        link = latest_post(run)
        return line if link is None else replace(line, link=link)

    def _live_expected(self, line: Line, run: RunView | None) -> bool:
        if not getattr(self.kit.config, "live_run_messages", False) or run is None or run.started_at is None:
            return False  # no live messages here, or none for a run that never started
        if line.at is None:
            return False
        return (self._now() - line.at).total_seconds() < LINK_WAIT

    def _now(self) -> dt.datetime:
        return self.kit.clock.now()

    async def _run(self, run_id: int) -> RunView | None:
        try:
            return await run_view(self.kit.engine, run_id, self.kit.versions)
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
