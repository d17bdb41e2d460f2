"""Sign-ups for a run: join, leave, the list. No Discord here: a member is an id and a name, and
their roles are the config's role aliases they hold (the front end works those out).

Each operation is one transaction that begins by locking the run's ``*`` pool row
(``runner.sql.signups``), so the joins and leaves of one run are serialised by the database, in
the order it granted that lock: the click order. A seat is an UPDATE guarded by
``taken < capacity`` that the server answers; a leave frees the seat and promotes the first
waitlisted member whose option then has room, and writes their notice row, in that same
transaction: a process killed before the commit leaves nothing behind, one killed after it
leaves exactly one promotion and one notice for whoever delivers notices
(``claim_notices`` / ``settle_notice``).
"""

from __future__ import annotations

import datetime as dt
import enum
import weakref
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner import history
from runner.catalog import VersionCache
from runner.db import retry_on_conflict
from runner.definitions import SignupDefinition
from runner.errors import UnreadableDefinition
from runner.sql import signups as sql
from runner.states import RUN_TERMINAL, RunStatus, SignupImport, SignupStatus

OVERALL = sql.OVERALL
# Versions never change, so every caller in the process shares one parse of each per database.
_VERSIONS: weakref.WeakKeyDictionary[AsyncEngine, VersionCache] = weakref.WeakKeyDictionary()


def share_versions(engine: AsyncEngine, versions: VersionCache) -> None:
    """Read ``engine``'s versions through the process's own cache (the runner's), so a version
    that cannot be read is logged once in the process, not once more by sign-ups."""
    _VERSIONS[engine] = versions


class RefusedWhy(enum.StrEnum):
    CLOSED = "closed"
    NOT_ALLOWED_ROLE = "not_allowed_role"
    NO_SUCH_OPTION = "no_such_option"
    RUN_OVER = "run_over"
    # The run does not exist, or its event has no ``signup:``.
    NO_SIGNUP = "no_signup"


@dataclass(frozen=True)
class Confirmed:
    option: str
    position: int


@dataclass(frozen=True)
class Waitlisted:
    option: str
    # Where they stand in the option's waiting list (1: next).
    place: int
    position: int
    event_full: bool = False  # the option had room but the run's overall capacity had none


@dataclass(frozen=True)
class AlreadyIn:
    option: str
    status: SignupStatus
    place: int | None = None


@dataclass(frozen=True)
class Moved:
    """Signed up in another option than before: the new option's answer, and whom the seat they
    gave up went to."""

    from_option: str
    now: Confirmed | Waitlisted
    promoted: Promotion | None = None


@dataclass(frozen=True)
class Refused:
    why: RefusedWhy
    # For ``not_allowed_role``: the roles that may sign up; ``no_such_option``: the options.
    needed: tuple[str, ...] = ()
    closes_at: dt.datetime | None = None


JoinAnswer = Confirmed | Waitlisted | AlreadyIn | Moved | Refused


@dataclass(frozen=True)
class AlreadyKnown:
    """The member signed up before (they may have left since) or was imported before: an
    import leaves them as they are."""


ImportAnswer = Confirmed | Waitlisted | AlreadyKnown | Refused


@dataclass(frozen=True)
class Promotion:
    member_id: str
    member_name: str
    option: str


@dataclass(frozen=True)
class Left:
    option: str
    was: SignupStatus
    promoted: Promotion | None = None
    # Left less than the sign-up's ``late_cancel`` before the start (flagged in the staff log).
    late: bool = False


@dataclass(frozen=True)
class NotSignedUp:
    pass


LeaveAnswer = Left | NotSignedUp | Refused


@dataclass(frozen=True)
class Signup:
    member_id: str
    member_name: str
    option: str
    status: SignupStatus
    position: int
    joined_at: dt.datetime


@dataclass(frozen=True)
class OptionList:
    name: str
    capacity: int | None
    confirmed: list[Signup] = field(default_factory=list)
    waitlisted: list[Signup] = field(default_factory=list)


@dataclass(frozen=True)
class SignupList:
    run_id: int
    definition: SignupDefinition
    options: list[OptionList]
    starts_at: dt.datetime
    # ``None``: open until the run ends (``closes: end``).
    closes_at: dt.datetime | None
    run_status: RunStatus

    @property
    def confirmed(self) -> list[Signup]:
        return sorted((s for o in self.options for s in o.confirmed), key=lambda s: s.position)

    @property
    def waitlisted(self) -> list[Signup]:
        return sorted((s for o in self.options for s in o.waitlisted), key=lambda s: s.position)

    def is_closed(self, now: dt.datetime) -> bool:
        return _closed(self.run_status, self.closes_at, now)


@dataclass(frozen=True)
class _Run:
    status: RunStatus
    starts_at: dt.datetime
    signup: SignupDefinition

    @property
    def closes_at(self) -> dt.datetime | None:
        if self.signup.open_until_the_end:
            return None
        return self.starts_at - dt.timedelta(seconds=self.signup.closes_before_start())


def _closed(status: RunStatus, closes_at: dt.datetime | None, now: dt.datetime) -> bool:
    if closes_at is None:
        return status in RUN_TERMINAL
    # Past the start (a run started early by hand, too) nobody new signs up.
    return status != RunStatus.SCHEDULED or now >= closes_at


async def _run(conn: AsyncConnection, run_id: int) -> _Run | None:
    row = await sql.run_for_signup(conn, run_id)
    if row is None:
        return None
    cache = _VERSIONS.setdefault(conn.engine, VersionCache())
    try:
        signup = (await cache.get(conn, int(row["version_id"]))).signup
    except UnreadableDefinition:
        # The runner leaves such a run alone (its staff are told); so do sign-ups.
        return None
    if signup is None:
        return None
    return _Run(RunStatus(row["status"]), row["scheduled_for"], signup)


def _over(status: RunStatus) -> bool:
    return status in RUN_TERMINAL


@retry_on_conflict
async def _ensure_pools(engine: AsyncEngine, run_id: int, signup: SignupDefinition) -> None:
    """The run's pools, in a transaction of their own before the first join's: the join then
    only ever locks rows that exist."""
    async with engine.begin() as conn:
        if not await sql.pools_exist(conn, run_id):
            await sql.create_pools(conn, run_id, signup.capacity, signup.options.items())


async def join(
    engine: AsyncEngine,
    run_id: int,
    member_id: str,
    member_name: str,
    option: str,
    member_roles: Collection[str],
    now: dt.datetime,
) -> JoinAnswer:
    """Sign ``member_id`` up in ``option`` (``member_roles``: the role aliases they hold)."""
    async with engine.connect() as conn:
        run = await _run(conn, run_id)
    refused = _refusal(run, option, member_roles, now)
    if refused is not None:
        return refused
    assert run is not None
    await _ensure_pools(engine, run_id, run.signup)
    answer = await _join(engine, run_id, member_id, member_name, option, member_roles, now)
    assert not isinstance(answer, AlreadyKnown), "only an import is told so"
    return answer


def _refusal(
    run: _Run | None, option: str, member_roles: Collection[str], now: dt.datetime
) -> Refused | None:
    if run is None:
        return Refused(RefusedWhy.NO_SIGNUP)
    if _over(run.status):
        return Refused(RefusedWhy.RUN_OVER)
    if _closed(run.status, run.closes_at, now):
        return Refused(RefusedWhy.CLOSED, closes_at=run.closes_at)
    if option not in run.signup.options:
        return Refused(RefusedWhy.NO_SUCH_OPTION, needed=tuple(run.signup.options))
    allowed = run.signup.roles
    if allowed and not set(allowed) & set(member_roles):
        return Refused(RefusedWhy.NOT_ALLOWED_ROLE, needed=tuple(allowed))
    return None


async def import_interested(
    engine: AsyncEngine,
    run_id: int,
    member_id: str,
    member_name: str,
    member_roles: Collection[str],
    now: dt.datetime,
) -> ImportAnswer:
    """Sign up a member who marked the run's Discord scheduled event Interested, in the
    sign-up's ``interested`` option, as their click would (capacity, waiting list and roles
    hold): once, and only if they never signed up. The import is one way: a member who left is
    not signed up again, and one refused for their roles is recorded so they are not asked
    about again (``event_signup_imports``). ``member_roles``: the role aliases they hold."""
    async with engine.connect() as conn:
        run = await _run(conn, run_id)
    option = run.signup.interested if run is not None else None
    if run is None or option is None:
        return Refused(RefusedWhy.NO_SIGNUP)
    answer: ImportAnswer | JoinAnswer | None = _refusal(run, option, member_roles, now)
    if answer is None:
        await _ensure_pools(engine, run_id, run.signup)
        answer = await _join(engine, run_id, member_id, member_name, option, member_roles, now, imported=True)
    if isinstance(answer, Refused) and answer.why == RefusedWhy.NOT_ALLOWED_ROLE:
        async with engine.begin() as conn:
            await sql.record_import(conn, run_id, member_id, SignupImport.NOT_ALLOWED_ROLE, now)
    assert not isinstance(answer, AlreadyIn | Moved), "an import never touches a sign-up that exists"
    return answer


async def imported_members(engine: AsyncEngine, run_id: int) -> dict[str, SignupImport]:
    """Each member imported into ``run_id`` from the Interested list, and what became of them."""
    async with engine.connect() as conn:
        rows = await sql.imports_of(conn, run_id)
    return {str(row["member_id"]): SignupImport(row["outcome"]) for row in rows}


async def known_members(engine: AsyncEngine, run_id: int) -> set[str]:
    """The members of ``run_id`` an import passes by: signed up (left too) or imported before."""
    async with engine.connect() as conn:
        return await sql.known_members(conn, run_id)


@retry_on_conflict
async def _join(
    engine: AsyncEngine,
    run_id: int,
    member_id: str,
    member_name: str,
    option: str,
    member_roles: Collection[str],
    now: dt.datetime,
    *,
    imported: bool = False,
) -> JoinAnswer | AlreadyKnown:
    async with engine.begin() as conn:
        click = await sql.next_click(conn, run_id)
        assert click is not None, "the pools were created before"
        # Read again under the lock: a cancel or the start may have come since the first look.
        run = await _run(conn, run_id)
        refused = _refusal(run, option, member_roles, now)
        if refused is not None:
            return refused
        assert run is not None
        existing = await sql.signup_of(conn, run_id, member_id)
        if imported and (existing is not None or await sql.was_imported(conn, run_id, member_id)):
            # Under the lock: a click that came since the poll read the list is never moved.
            return AlreadyKnown()
        status = SignupStatus(existing["status"]) if existing else None
        if existing is not None and status != SignupStatus.CANCELLED and existing["option"] == option:
            place = (
                await sql.waitlist_place(conn, run_id, option, int(existing["position"]))
                if status == SignupStatus.WAITLISTED
                else None
            )
            assert status is not None
            return AlreadyIn(option, status, place)
        promoted: Promotion | None = None
        if existing is not None and status == SignupStatus.CONFIRMED:
            # A move keeps the overall seat when the new option has one; else it is given up.
            full = None if await sql.take_seat(conn, run_id, option) else option
            await sql.free_seat(conn, run_id, str(existing["option"]))
            if full is not None:
                await sql.free_seat(conn, run_id, OVERALL)
        else:
            full = await _take_seats(conn, run_id, option)
        now_status = SignupStatus.CONFIRMED if full is None else SignupStatus.WAITLISTED
        await sql.write_signup(
            conn,
            run_id=run_id,
            member_id=member_id,
            member_name=member_name,
            option=option,
            status=now_status,
            position=click,
            now=now,
            existed=existing is not None,
        )
        answer: Confirmed | Waitlisted = Confirmed(option, click)
        if full is not None:
            place = await sql.waitlist_place(conn, run_id, option, click)
            answer = Waitlisted(option, place, click, event_full=full == OVERALL)
        if imported:
            await sql.record_import(conn, run_id, member_id, SignupImport.JOINED, now)
        if existing is not None and status == SignupStatus.CONFIRMED:
            promoted = await _promote(conn, run_id, now, left=(member_id, member_name))
            return Moved(str(existing["option"]), answer, promoted)
        if existing is not None and status == SignupStatus.WAITLISTED:
            return Moved(str(existing["option"]), answer)
        return answer


async def _take_seats(conn: AsyncConnection, run_id: int, option: str) -> str | None:
    """A seat of the option and one of the run, or neither: None, or the pool that was full
    (``OVERALL``: the option had room, the event had none)."""
    if not await sql.take_seat(conn, run_id, option):
        return option
    if await sql.take_seat(conn, run_id, OVERALL):
        return None
    await sql.free_seat(conn, run_id, option)
    return OVERALL


async def _promote(
    conn: AsyncConnection, run_id: int, now: dt.datetime, *, left: tuple[str, str]
) -> Promotion | None:
    """The first waitlisted member whose option has a seat, into it, with their notice row and
    the run-log line, all in the caller's transaction (which holds the run's lock)."""
    overall = next(p for p in await sql.pools(conn, run_id) if p["pool"] == OVERALL)
    if overall["capacity"] is not None and overall["taken"] >= overall["capacity"]:
        return None
    first = await sql.first_waitlisted_with_room(conn, run_id)
    if first is None:
        return None
    member_id, option, position = str(first["member_id"]), str(first["option"]), int(first["position"])
    full = await _take_seats(conn, run_id, option)
    assert full is None, "the run's lock is held: the seat just seen free is still free"
    moved = await sql.set_status(
        conn, run_id, member_id, from_=SignupStatus.WAITLISTED, to=SignupStatus.CONFIRMED, now=now
    )
    assert moved, "the run's lock is held: the waitlisted row just read is still waitlisted"
    await sql.add_notice(conn, run_id, member_id, option, position, now)
    name = str(first["member_name"])
    event = history.SignupPromoted(member_id, name, option, left_id=left[0], left_name=left[1])
    await history.record(conn, run_id, event, now)
    return Promotion(member_id, name, option)


@retry_on_conflict
async def leave(
    engine: AsyncEngine, run_id: int, member_id: str, member_name: str, now: dt.datetime
) -> LeaveAnswer:
    """Take ``member_id`` off the run's list; a seat they held goes to the first member waiting
    for it, once."""
    async with engine.begin() as conn:
        if not await sql.lock_run(conn, run_id):
            return NotSignedUp()
        run = await _run(conn, run_id)
        if run is None:
            return Refused(RefusedWhy.NO_SIGNUP)
        if _over(run.status):
            return Refused(RefusedWhy.RUN_OVER)
        existing = await sql.signup_of(conn, run_id, member_id)
        if existing is None or existing["status"] == SignupStatus.CANCELLED:
            return NotSignedUp()
        was = SignupStatus(existing["status"])
        option = str(existing["option"])
        moved = await sql.set_status(conn, run_id, member_id, from_=was, to=SignupStatus.CANCELLED, now=now)
        assert moved, "the run's lock is held: the row just read has not changed"
        if was != SignupStatus.CONFIRMED:
            return Left(option, was)
        await sql.free_seat(conn, run_id, option)
        await sql.free_seat(conn, run_id, OVERALL)
        promoted = await _promote(conn, run_id, now, left=(member_id, member_name))
        before_start = (run.starts_at - now).total_seconds()
        late = before_start < run.signup.late_cancel
        if late:
            event = history.SignupLateCancel(member_id, member_name, option, before_start, run.starts_at)
            await history.record(conn, run_id, event, now, actor=history.Actor(member_id, member_name))
        return Left(option, was, promoted, late)


async def listing(engine: AsyncEngine, run_id: int) -> SignupList | None:
    """The run's list per option, in click order (``None``: the run has no sign-up)."""
    async with engine.connect() as conn:
        run = await _run(conn, run_id)
        if run is None:
            return None
        rows = await sql.for_run(conn, run_id)
    by_option = {name: OptionList(name, cap) for name, cap in run.signup.options.items()}
    for row in rows:
        signup = Signup(
            str(row["member_id"]),
            str(row["member_name"]),
            str(row["option"]),
            SignupStatus(row["status"]),
            int(row["position"]),
            row["joined_at"],
        )
        # An option a newer version dropped is still listed: those people signed up.
        option = by_option.setdefault(signup.option, OptionList(signup.option, None))
        (option.confirmed if signup.status == SignupStatus.CONFIRMED else option.waitlisted).append(signup)
    return SignupList(run_id, run.signup, list(by_option.values()), run.starts_at, run.closes_at, run.status)


async def counts(engine: AsyncEngine, run_ids: Sequence[int]) -> dict[int, dict[SignupStatus, int]]:
    """How many are confirmed and waitlisted on each run (runs without any are left out)."""
    async with engine.connect() as conn:
        rows = await sql.counts_for_runs(conn, run_ids)
    out: dict[int, dict[SignupStatus, int]] = {}
    for row in rows:
        out.setdefault(int(row["run_id"]), {})[SignupStatus(row["status"])] = int(row["n"])
    return out


@dataclass(frozen=True)
class RunSignups:
    """``actions.signup.SignupStore`` on the database: a run's sign-up list."""

    engine: AsyncEngine

    async def listing(self, run_id: int) -> SignupList | None:
        return await listing(self.engine, run_id)


async def attendees(engine: AsyncEngine, run_id: int) -> list[str]:
    """The confirmed members' ids, in click order: ``{attendees}`` and a cue's ``ping: attendees``."""
    found = await listing(engine, run_id)
    return [s.member_id for s in found.confirmed] if found else []


# ── Notices ──────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Notice:
    id: int
    run_id: int
    member_id: str
    option: str
    kind: str
    attempts: int


NOTICE_LEASE_SECONDS = 30.0


async def claim_notices(
    engine: AsyncEngine, owner: str, now: dt.datetime, *, limit: int = 20
) -> list[Notice]:
    """Undelivered notices, each claimed by ``owner`` for ``NOTICE_LEASE_SECONDS`` (a process
    that dies holding one leaves it to the next claimer once the lease is over)."""
    until = now + dt.timedelta(seconds=NOTICE_LEASE_SECONDS)
    claimed: list[Notice] = []
    async with engine.connect() as conn:
        candidates = await sql.open_notices(conn, now, limit)
    for row in candidates:
        async with engine.begin() as conn:
            if not await sql.claim_notice(conn, int(row["id"]), owner, now, until):
                continue
        claimed.append(
            Notice(
                int(row["id"]),
                int(row["run_id"]),
                str(row["member_id"]),
                str(row["option"]),
                str(row["kind"]),
                int(row["attempts"]) + 1,
            )
        )
    return claimed


async def settle_notice(
    engine: AsyncEngine,
    notice: Notice,
    owner: str,
    now: dt.datetime,
    *,
    via: str | None = None,
    error: str | None = None,
    retry_in: float = 60.0,
) -> bool:
    """Delivered ``via`` (``dm`` / ``mention``), or failed with ``error`` (tried again later)."""
    async with engine.begin() as conn:
        return await sql.settle_notice(
            conn,
            notice.id,
            owner,
            now,
            via=via,
            error=error,
            retry_at=None if via else now + dt.timedelta(seconds=retry_in),
        )


# ── The sign-up message (the front end posts and edits it) ─────────────────


@dataclass(frozen=True)
class SignupMessage:
    run_id: int
    channel_id: str
    message_id: str | None
    digest: str | None
    closed: bool


def _message(row: sql.Row) -> SignupMessage:
    return SignupMessage(
        int(row["run_id"]),
        str(row["channel_id"]),
        str(row["message_id"]) if row["message_id"] is not None else None,
        row["digest"],
        bool(row["closed"]),
    )


async def runs_to_announce(
    engine: AsyncEngine, after_run_id: int, *, limit: int = 200
) -> tuple[list[tuple[int, str]], int]:
    """Runs in flight past ``after_run_id`` whose sign-up names a channel and that have no
    message yet: (run id, the channel as written); and the last run id looked at."""
    found: list[tuple[int, str]] = []
    last = after_run_id
    async with engine.connect() as conn:
        rows = await sql.runs_without_message(conn, after_run_id, limit)
        cache = _VERSIONS.setdefault(engine, VersionCache())
        for row in rows:
            last = max(last, int(row["id"]))
            try:
                signup = (await cache.get(conn, int(row["version_id"]))).signup
            except UnreadableDefinition:
                continue
            if signup is not None and signup.channel:
                found.append((int(row["id"]), signup.channel))
    return found, last


async def claim_message(
    engine: AsyncEngine, run_id: int, channel_id: str, owner: str, now: dt.datetime, *, seconds: float = 60.0
) -> bool:
    """Write the message's row before posting it: one process posts it."""
    async with engine.begin() as conn:
        return await sql.claim_message(
            conn, run_id, channel_id, owner, now, now + dt.timedelta(seconds=seconds)
        )


async def reclaim_unposted(
    engine: AsyncEngine, owner: str, now: dt.datetime, *, seconds: float = 60.0
) -> list[SignupMessage]:
    """Rows whose poster died before storing the message id, claimed again by ``owner``."""
    claimed = []
    async with engine.connect() as conn:
        rows = await sql.unposted_messages(conn, now)
    for row in rows:
        async with engine.begin() as conn:
            if await sql.reclaim_unposted(
                conn, int(row["run_id"]), owner, now, now + dt.timedelta(seconds=seconds)
            ):
                claimed.append(_message(row))
    return claimed


class StepClaim(enum.StrEnum):
    # The run has its message: nothing to post.
    POSTED = "posted"
    # The caller holds the row: it posts, where the row says.
    CLAIMED = "claimed"
    # Another poster holds a live claim (the booking, posting now): ask again later.
    BUSY = "busy"


async def claim_for_step(
    engine: AsyncEngine,
    run_id: int,
    channel_id: str,
    claimer: str,
    now: dt.datetime,
    *,
    seconds: float = 60.0,
) -> tuple[StepClaim, SignupMessage]:
    """A ``discord.signup`` step's turn at the run's one message. The row is written before the
    post, as the booking writes it (``claim_message``), so whichever writes it first posts; a
    retry of the same step (``claimer``) takes its own row back at once, to post again with the
    run's nonce (Discord answers a repeat with the message posted first)."""
    until = now + dt.timedelta(seconds=seconds)
    async with engine.begin() as conn:
        if await sql.claim_message(conn, run_id, channel_id, claimer, now, until):
            row = await sql.message_of(conn, run_id)
            assert row is not None
            return StepClaim.CLAIMED, _message(row)
    async with engine.begin() as conn:
        row = await sql.message_of(conn, run_id)
        assert row is not None, "a sign-up message row is never deleted while its run exists"
        if row["message_id"] is not None:
            return StepClaim.POSTED, _message(row)
        taken = await sql.take_over_unposted(conn, run_id, claimer, now, until)
        return (StepClaim.CLAIMED if taken else StepClaim.BUSY), _message(row)


async def message_posted(
    engine: AsyncEngine, run_id: int, message_id: str, digest: str, now: dt.datetime
) -> None:
    async with engine.begin() as conn:
        await sql.message_posted(conn, run_id, message_id, digest, now)


async def message_shown(
    engine: AsyncEngine, run_id: int, digest: str, now: dt.datetime, *, closed: bool
) -> None:
    async with engine.begin() as conn:
        await sql.message_shown(conn, run_id, digest, now, closed=closed)


async def open_messages(engine: AsyncEngine) -> list[SignupMessage]:
    async with engine.connect() as conn:
        return [_message(row) for row in await sql.open_messages(conn)]


async def message_of(engine: AsyncEngine, run_id: int) -> SignupMessage | None:
    async with engine.connect() as conn:
        row = await sql.message_of(conn, run_id)
    return _message(row) if row is not None else None


async def event_title(engine: AsyncEngine, run_id: int) -> str | None:
    """The run's event title, for the message's heading and the notices."""
    async with engine.connect() as conn:
        row = await sql.run_for_signup(conn, run_id)
        if row is None:
            return None
        cache = _VERSIONS.setdefault(engine, VersionCache())
        try:
            return (await cache.get(conn, int(row["version_id"]))).title
        except UnreadableDefinition:
            return None
