"""Where rehearsal output goes: lines stamped with the virtual time since the rehearsal began,
or (``--json``) one JSON object per line. The text is quiet unless asked (``-v``): what players
and GMs would see, the waits, what went wrong and how each run ended; JSON carries every record."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from runner.clock import Clock
from runner.errors import Problem


def format_offset(seconds: float) -> str:
    """``+HH:MM:SS`` since the event started (hours go past 24 rather than wrapping);
    ``-HH:MM:SS`` before it, where its reminders go out."""
    whole = int(seconds)
    sign = "-" if whole < 0 else "+"
    hours, rest = divmod(abs(whole), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"


def format_duration(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


class Console:
    """Where rehearsal output goes: text lines stamped with the virtual time, or (``--json``)
    one JSON object per line. Every ``emit`` carries both forms, so the two never drift.
    ``aside`` is for the engine's bookkeeping (status transitions, a step done that showed
    nothing): a tool reading JSON wants it, a moderator reading text only with ``verbose``."""

    STAMP_WIDTH = len("[+00:00:00] ")

    def __init__(
        self, clock: Clock, *, as_json: bool, stream: TextIO | None = None, verbose: bool = False
    ) -> None:
        self.clock = clock
        self.start = clock.now()
        self.as_json = as_json
        self.verbose = verbose
        self._stream = stream
        self._held: dict[int, list[Callable[[], None]]] = {}

    @property
    def stream(self) -> TextIO:
        # Looked up at each write, so a caller (or pytest's capsys) that swaps sys.stdout is obeyed.
        return self._stream or sys.stdout

    def elapsed(self, moment: dt.datetime | None = None) -> float:
        return ((moment or self.clock.now()) - self.start).total_seconds()

    def stamp(self, moment: dt.datetime | None = None) -> str:
        return f"[{format_offset(self.elapsed(moment))}]"

    def note(self, text: str) -> None:
        """An untimed line for people (headers, hints); JSON output leaves it out."""
        if not self.as_json:
            print(text, file=self.stream, flush=True)

    def emit(self, record_type: str, text: str, /, *more: str, **fields: Any) -> None:
        if self.as_json:
            now = self.clock.now()
            record = {
                "type": record_type,
                "at": now.isoformat(),
                "elapsed_seconds": self.elapsed(now),
                **fields,
            }
            print(json.dumps(record, default=str), file=self.stream, flush=True)
            return
        indent = " " * (self.STAMP_WIDTH + 2)
        lines = [f"{self.stamp()} {text}"] + [f"{indent}{line}" for line in more]
        print("\n".join(lines), file=self.stream, flush=True)

    def aside(self, record_type: str, text: str, /, *more: str, **fields: Any) -> None:
        """Like ``emit``, but left out of the text unless ``verbose``; JSON always has it."""
        if self.as_json or self.verbose:
            self.emit(record_type, text, *more, **fields)

    def emit_for_step(self, step_id: int, record_type: str, text: str, /, *more: str, **fields: Any) -> None:
        """Like ``emit``, but held until ``release(step_id)``: a delivery happens inside the
        tick, and the run log says only afterwards how the step got there (the run started,
        the phase began), so the message is printed just before its step's outcome."""
        self._held.setdefault(step_id, []).append(lambda: self.emit(record_type, text, *more, **fields))

    def release(self, step_id: int | None = None) -> None:
        """Print what was held for ``step_id`` (for every step when None)."""
        ids = list(self._held) if step_id is None else [step_id]
        for each in ids:
            for show in self._held.pop(each, []):
                show()

    def problems(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            if self.as_json:
                self.emit(
                    "problem",
                    str(problem),
                    message=problem.message,
                    file=problem.file,
                    phase=problem.phase,
                    step=problem.step,
                    field=problem.field,
                )
            else:
                print(f"  {problem}", file=self.stream, flush=True)


def is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # closed, or not a real file
        return False


def run_label(run_id: int, scope: str) -> str:
    return f"run {run_id} {scope}" if scope else f"run {run_id}"
