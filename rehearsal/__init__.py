"""Rehearse an event definition offline: the real engine on SQLite, a console instead of Discord.

A rehearsal publishes the definition to a throwaway database (or one named with ``--database``),
starts it as a rehearsal run (one per scope), and drives the very same ``Runner.tick`` the bot
drives, on a virtual clock: when nothing is due, the clock jumps to the next instant a run wants
(``Runner.next_wake``), so a ten-minute wait passes at once (or ``delta / speed`` real seconds
with ``--speed``). Cues are answered from the keyboard or automatically, through the same
``Controls.confirm`` / ``Controls.skip`` the Discord buttons call.

A rehearsal kept with ``--database`` that was interrupted (Ctrl-C, a crash, a pause, a cue left
unanswered) leaves its runs in flight, and a new rehearsal refuses that database. From the
command line it is then carried on (``resume_rehearsals``: paused runs resumed, the rest driven
to the end exactly as before) or cleared (``cancel_rehearsals``, through ``Controls.cancel``).

What players and GMs would see is printed by ``ConsoleDelivery``; what the runner did is read
back from the run log after each tick, so the rehearsal reports the engine's own account of the
run rather than a guess at it. Nothing here talks to Discord.
"""

from rehearsal.console import Console, format_duration, format_offset, is_terminal, run_label
from rehearsal.delivery import ConsoleDelivery
from rehearsal.entry import CANCEL_ACTOR, cancel_rehearsals, rehearse, resume_rehearsals
from rehearsal.session import ACTOR, MAX_ITERATIONS, REHEARSAL_SETTINGS, CueMode, Rehearsal, RehearsalOptions

__all__ = [
    "ACTOR",
    "CANCEL_ACTOR",
    "MAX_ITERATIONS",
    "REHEARSAL_SETTINGS",
    "Console",
    "ConsoleDelivery",
    "CueMode",
    "Rehearsal",
    "RehearsalOptions",
    "cancel_rehearsals",
    "format_duration",
    "format_offset",
    "is_terminal",
    "rehearse",
    "resume_rehearsals",
    "run_label",
]
