"""How big an event may be, and how often a schedule may fire: checked when a definition is
validated, so an event that publishes is one the bot can deliver and staff can follow.

Each limit says why it is where it is. They are chosen from what Discord can deliver (a bot may
send about 50 requests a second in all), what one tick on SQLite's single connection can carry
while a moderator's control still gets its answer within Discord's 3 seconds, and what a person
can follow in ``/event status`` (one embed: 25 fields, 6,000 characters).
"""

from __future__ import annotations

# Runs one start creates (one per scope). 500 is the fan-out the benchmarks measure
# (bench/fanout.py): 500 announcements at Discord's 50 per second take 10 s to go out, so the
# last scope hears the news 10 s after the first. More scopes would stretch that further.
MAX_SCOPES = 500

# Phases per event. ``/event status`` shows one embed field per phase and Discord allows 25
# fields; past 50 the status cannot show even half of an event, and staff lose track.
MAX_PHASES = 50

# Steps per event, all phases together: a live event of more than 200 announcements, waits and
# cues is more than one team of staff can follow, and the rehearsal plays every one of them.
# (How many of them one phase may hold is bounded by MAX_FANOUT_STEPS below: a phase's steps are
# created together, for every scope.)
MAX_STEPS = 200

# Values in one definition, all its lists and mappings together (a value repeated by a YAML
# alias counts each time it is repeated). The largest event the other limits allow, written out,
# holds about 4,000 (500 scopes, 200 steps of a dozen params each). Every check looks at each
# value once or a few times, so this bounds what one upload can cost: 256 KB of unknown fields
# or of aliases repeated took seconds to list, one "did you mean" each.
MAX_VALUES = 10_000

# Step rows one start (or one phase change across every scope) writes at once: scopes times the
# steps of the largest phase. The start writes them in one transaction, which on SQLite holds
# the database's one connection: 2,500 rows take about a second on the benchmark machine, so
# every other control still answers within Discord's 3 s.
MAX_FANOUT_STEPS = 2_500

# A cron may not fire more often than every 5 minutes: an "event" more frequent than that is a
# loop, and each occurrence is a run of its own, with its own history and staff-log lines.
CRON_MIN_INTERVAL_SECONDS = 5 * 60

# Runs a schedule may create in one day: occurrences a day times scopes. One day's schedule
# then costs no more than the largest manual start (MAX_SCOPES runs), and the 24 h the runner
# materialises ahead stays one bounded batch.
MAX_SCHEDULED_RUNS_PER_DAY = 500
