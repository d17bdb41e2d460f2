"""An uploaded definition read and checked in a process of its own, with a time cap (issue 26
item 3).

Why a process, not a thread: reading 256 KB of YAML is pure Python and takes a second or more;
in a thread it still holds the GIL, and the event loop (every click, tick and lease renewal of
the bot) waited up to 150 ms at a time for it (``python -m bench --only upload``). A process
shares nothing with the loop, and one that runs past its cap is killed, which a thread cannot
be: nothing it was doing is stored anywhere.

Each check is a fresh child of multiprocessing's fork server, which imported the checking code
once, so a child starts in milliseconds without copying the bot's threads, sockets or database
connections. At most ``SLOTS`` run at once; more wait for a slot. The caller waits in a worker
thread, by the wall clock (simcord's loop clock stands still while the bot settles). The child
imports the main module again when it was run as a script (multiprocessing's rule); the bot runs
as ``python -m bot``, which it does not.
"""

from __future__ import annotations

import multiprocessing
import select
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

# Two checks at once on the bot's host (a small VM has two cores; the loop keeps its own).
SLOTS = 2
# What the fork server imports once, so each check's child starts with it loaded.
PRELOAD = ["bot.cogs.publishing._flow"]

_slots = threading.BoundedSemaphore(SLOTS)
_context: Any = None
_context_lock = threading.Lock()


class TookTooLong(Exception):
    """The check ran past its cap; its process was killed."""


class CheckerDied(Exception):
    """The check's process ended without an answer (killed from outside, or out of memory)."""


def _start_method() -> Any:
    global _context
    with _context_lock:
        if _context is None:
            # The fork server is not on every platform (not on Windows); spawn is slower but
            # shares as little.
            method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
            _context = multiprocessing.get_context(method)
            if method == "forkserver":
                _context.set_forkserver_preload(PRELOAD)
        return _context


def _serve(sender: Connection, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """In the child: ``target(*args)``'s result or exception, sent back once."""
    try:
        answer: tuple[bool, Any] = (True, target(*args))
    except Exception as exc:  # sent to the parent, which raises it there
        answer = (False, exc)
    try:
        sender.send(answer)
    except Exception as exc:  # an answer that cannot be pickled: its words still can
        sender.send((False, RuntimeError(f"{type(exc).__name__}: {exc}")))


def run_capped(target: Callable[..., Any], args: tuple[Any, ...], seconds: float) -> Any:
    """``target(*args)`` run in a child process: its result, or its exception raised here;
    ``TookTooLong`` if it has not answered within ``seconds`` (it is killed), ``CheckerDied`` if
    it ended without answering. Blocks: call it in a thread. ``target`` must be importable by
    name and its arguments and result picklable."""
    context = _start_method()
    with _slots:
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(
            target=_serve, args=(sender, target, args), daemon=True, name="eventbot-upload-check"
        )
        process.start()
        sender.close()
        answered = False
        try:
            # select's own timeout is the kernel's: multiprocessing's waits (``poll``,
            # ``is_alive``, ``join`` with a timeout) count down by ``time.monotonic``, which a
            # test harness (simcord) may have stopped.
            ready, _, _ = select.select([receiver], [], [], seconds)
            if not ready:
                raise TookTooLong
            ok, value = receiver.recv()
            answered = True
        except EOFError:
            raise CheckerDied from None
        finally:
            receiver.close()
            if not answered:
                process.kill()
            process.join()
    if not ok:
        raise value
    return value
