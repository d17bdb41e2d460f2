"""Throwaway MariaDB server for tests.

Starts a private ``mariadbd`` with its own temporary data directory, unix
socket and a free TCP port on 127.0.0.1, creates an ``eventbot`` account with
a random password and full privileges (tests create and drop their own
databases), and tears everything down again afterwards.

It never reads /etc/mysql (``--no-defaults`` everywhere), never uses the
system data directory and never talks to a system-wide server: every client
call goes through *our* socket file inside the temporary directory.

Usage::

    with ThrowawayMariaDB() as db:
        db.create_database("t1")
        engine = create_async_engine(db.url("t1"))
        ...

Fault tests can stop the database underneath running code::

    db.kill_hard()      # SIGKILL, data directory is kept
    time.sleep(10)
    db.restart()        # same port, same data directory, same users

Self-check (run as root or as a normal user)::

    .venv/bin/python -m tests.support.mariadb_server
"""

from __future__ import annotations

import atexit
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

__all__ = [
    "MariaDBServerError",
    "ThrowawayMariaDB",
    "find_mariadbd",
    "find_tool",
]

# Extra directories searched after $PATH.  Debian puts mariadbd in /usr/sbin,
# which is often missing from a normal user's PATH; some distros use libexec.
_EXTRA_DIRS = ("/usr/sbin", "/usr/libexec", "/usr/local/sbin", "/usr/local/bin", "/usr/bin")

# unix socket paths are limited to 108 bytes (sun_path) on Linux.
_MAX_SOCKET_PATH = 100

_DB_NAME_RE = re.compile(r"^[A-Za-z0-9_]{1,64}$")


class MariaDBServerError(RuntimeError):
    """The throwaway server could not be installed, started or stopped."""


# --------------------------------------------------------------------------
# Locating binaries
# --------------------------------------------------------------------------


def find_tool(*names: str) -> str | None:
    """Return the first of ``names`` found on $PATH or in the usual sbin dirs."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    for name in names:
        for directory in _EXTRA_DIRS:
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    return None


def find_mariadbd() -> str | None:
    """Locate the server binary: ``mariadbd``, falling back to ``mysqld``."""
    return find_tool("mariadbd", "mysqld")


def _require(kind: str, *names: str) -> str:
    path = find_tool(*names)
    if path is None:
        raise MariaDBServerError(
            f"cannot find the MariaDB {kind} (tried {', '.join(names)} on PATH and in "
            f"{', '.join(_EXTRA_DIRS)}); install the mariadb-server package"
        )
    return path


# Under pytest-xdist every worker starts servers of its own at the same time. A port the kernel
# hands out for ``bind(0)`` comes from the ephemeral range, which is also where every outgoing
# connection's local port comes from, and two workers asking at once may be told the same one. So
# each worker takes ports from a block of its own below the ephemeral range (which starts at 32768
# on Linux); the process outside xdist (a single run, ``python -m tests.support.mariadb_server``)
# takes the block of worker 0. A port handed out once is never handed out again by the same process:
# a stopped server keeps its port for its restart.
_PORT_BLOCK_START = 12000
_PORT_BLOCK_SIZE = 2500
_PORT_BLOCKS = 8
_handed_out: set[int] = set()


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = worker.removeprefix("gw")
    return int(digits) % _PORT_BLOCKS if digits.isdigit() else 0


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on, from this process's own block.

    There is a small race (another program could grab the port before mariadbd binds it), but
    no other test worker can: their blocks are their own.
    """
    first = _PORT_BLOCK_START + _worker_index() * _PORT_BLOCK_SIZE
    offset = secrets.randbelow(_PORT_BLOCK_SIZE)
    for step in range(_PORT_BLOCK_SIZE):
        port = first + (offset + step) % _PORT_BLOCK_SIZE
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    raise MariaDBServerError(f"no free port left in {first}-{first + _PORT_BLOCK_SIZE - 1}")


def _current_user() -> str:
    """Name of the effective user (not $USER, which sudo may leave stale)."""
    return pwd.getpwuid(os.geteuid()).pw_name


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"<{path} not readable>"
    return "\n".join(text.splitlines()[-lines:])


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class ThrowawayMariaDB:
    """A private, disposable MariaDB server.

    ``start()`` creates a temporary directory, initialises a data directory
    in it, starts ``mariadbd`` and creates the test account.  ``stop()``
    shuts the server down and deletes the directory.  Also a context manager.
    """

    host = "127.0.0.1"

    def __init__(
        self,
        *,
        user: str = "eventbot",
        startup_timeout: float = 30.0,
        shutdown_timeout: float = 20.0,
        base_dir: str | None = None,
        verbose: bool = True,
    ) -> None:
        self.user = user
        self.password = secrets.token_hex(16)  # hex: safe in SQL literals and URLs
        self.port: int | None = None
        self.startup_timeout = startup_timeout
        self.shutdown_timeout = shutdown_timeout
        self.verbose = verbose
        self._base_dir = base_dir

        self.tmpdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._console = None  # file object receiving mariadbd stdout/stderr
        self._initialised = False  # data directory + users exist
        #: seconds spent in the last start()/restart(), broken down by phase
        self.timings: dict[str, float] = {}

        self._mariadbd = _require("server (mariadbd)", "mariadbd", "mysqld")
        self._install_db = _require("installer", "mariadb-install-db", "mysql_install_db")
        self._client = _require("client", "mariadb", "mysql")
        self._admin = _require("admin tool", "mariadb-admin", "mysqladmin")

    # ---- paths ----------------------------------------------------------

    def _path(self, name: str) -> Path:
        assert self.tmpdir is not None, "server not started"
        return self.tmpdir / name

    @property
    def datadir(self) -> Path:
        return self._path("data")

    @property
    def socket_path(self) -> Path:
        return self._path("mysqld.sock")

    @property
    def error_log(self) -> Path:
        return self._path("error.log")

    # ---- public API -----------------------------------------------------

    def url(self, database: str | None = None) -> str:
        """SQLAlchemy URL for the test account over TCP (asyncmy driver)."""
        if self.port is None:
            raise MariaDBServerError("server not started")
        return (
            f"mysql+asyncmy://{quote(self.user, safe='')}:{quote(self.password, safe='')}"
            f"@{self.host}:{self.port}/{database or ''}?charset=utf8mb4"
        )

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.is_running() else None

    def start(self) -> ThrowawayMariaDB:
        """Create the temp dir + data dir (first time only), start, create users."""
        if self.is_running():
            return self
        t0 = time.monotonic()
        self.timings = {}
        if not self._initialised:
            self._make_tmpdir()
            self.port = _free_port()
            self._install()
            self.timings["install_db"] = time.monotonic() - t0
        t1 = time.monotonic()
        self._launch()
        self.timings["server_ready"] = time.monotonic() - t1
        if not self._initialised:
            t2 = time.monotonic()
            self._create_account()
            self.timings["create_account"] = time.monotonic() - t2
            self._initialised = True
            atexit.register(self._atexit)
        self.timings["total"] = time.monotonic() - t0
        self._log(
            "started on port {} in {:.2f}s ({})".format(
                self.port,
                self.timings["total"],
                ", ".join(f"{k}={v:.2f}s" for k, v in self.timings.items() if k != "total"),
            )
        )
        return self

    def stop(self) -> None:
        """Shut the server down (graceful, then SIGTERM, then SIGKILL) and
        delete the temporary directory.  Safe to call more than once."""
        try:
            self.stop_server(graceful=True)
        finally:
            self._close_console()
            if self.tmpdir is not None:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
            self._initialised = False
            self.port = None
            atexit.unregister(self._atexit)

    def stop_server(self, graceful: bool = True) -> None:
        """Stop the mariadbd process but keep the data directory and port,
        so that ``restart()`` can bring the same server back."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._proc = None
            return
        t0 = time.monotonic()
        if graceful:
            # 1. polite: mariadb-admin shutdown over our socket.  We wait on
            #    mariadbd itself rather than on mariadb-admin, which polls the
            #    pid file only once a second.
            admin = subprocess.Popen(
                [*self._client_args(self._admin), "shutdown"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            # 2. SIGTERM (also a clean shutdown for mariadbd), 3. SIGKILL.
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None and proc.poll() is None:
                    self._log(f"server did not stop, sending {sig.name}")
                    proc.send_signal(sig)
                try:
                    proc.wait(timeout=self.shutdown_timeout)
                    break
                except subprocess.TimeoutExpired:
                    continue
            if admin.poll() is None:
                admin.kill()
            admin.wait()
        else:
            proc.kill()
            proc.wait(timeout=self.shutdown_timeout)
        self._proc = None
        self._log(
            "server stopped ({}) in {:.2f}s".format(
                "graceful" if graceful else "SIGKILL", time.monotonic() - t0
            )
        )

    def kill_hard(self) -> None:
        """SIGKILL the server (simulates a crash); data directory is kept."""
        self.stop_server(graceful=False)

    def restart(self) -> None:
        """Start the server again on the SAME port and data directory.

        If it is still running it is shut down gracefully first.  After a
        ``kill_hard()`` InnoDB performs crash recovery on startup.
        """
        if not self._initialised:
            raise MariaDBServerError("restart() before start()")
        self.stop_server(graceful=True)
        t0 = time.monotonic()
        self._launch()
        self.timings = {"server_ready": time.monotonic() - t0, "total": time.monotonic() - t0}
        self._log("restarted on port {} in {:.2f}s".format(self.port, self.timings["total"]))

    def execute_sql(self, sql: str) -> str:
        """Run SQL as MariaDB root over the unix socket with the command-line
        client; returns its (tab separated) stdout."""
        result = subprocess.run(
            [*self._client_args(self._client), "--batch", "--skip-column-names"],
            input=sql.encode(),
            capture_output=True,
            timeout=self.startup_timeout,
        )
        if result.returncode != 0:
            raise MariaDBServerError(
                f"mariadb client failed ({result.returncode}): "
                f"{result.stderr.decode(errors='replace').strip()}\nSQL: {sql}"
            )
        return result.stdout.decode(errors="replace")

    def create_database(self, name: str) -> None:
        self.execute_sql(
            f"CREATE DATABASE IF NOT EXISTS `{self._check_name(name)}` "
            "CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;"
        )

    def drop_database(self, name: str) -> None:
        self.execute_sql(f"DROP DATABASE IF EXISTS `{self._check_name(name)}`;")

    def __enter__(self) -> ThrowawayMariaDB:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<ThrowawayMariaDB {state} port={self.port} dir={self.tmpdir}>"

    # ---- internals ------------------------------------------------------

    def _log(self, msg: str) -> None:
        if self.verbose:
            print(f"[mariadb_server] {msg}", file=sys.stderr, flush=True)

    @staticmethod
    def _check_name(name: str) -> str:
        if not _DB_NAME_RE.match(name):
            raise ValueError(f"unsafe database name: {name!r}")
        return name

    def _make_tmpdir(self) -> None:
        self.tmpdir = Path(tempfile.mkdtemp(prefix="eventbot-mariadb-", dir=self._base_dir))
        if len(str(self.socket_path)) > _MAX_SOCKET_PATH:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
            raise MariaDBServerError(
                "temporary directory path too long for a unix socket; "
                "pass base_dir='/tmp' or set TMPDIR to a shorter path"
            )
        # mkdtemp makes it 0700 and owned by us; mariadbd runs as us too.

    def _server_options(self) -> list[str]:
        """Options shared by mariadb-install-db (which passes unknown ones on
        to its bootstrap mariadbd) and the real server."""
        return [
            f"--datadir={self.datadir}",
            "--skip-name-resolve",  # no DNS; grants use IPs / 'localhost'
            "--innodb-buffer-pool-size=64M",  # defaults are sized for real servers
            "--innodb-log-file-size=16M",  # default 96M: slower to create, 3x disk
            "--innodb-log-buffer-size=4M",
        ]

    def _install(self) -> None:
        # NB: deliberately NO --user here.  mariadb-install-db, when given
        # --user as root, chowns the *system* directory
        # /usr/lib/mysql/plugin/auth_pam_tool_dir to that user.  The bootstrap
        # mariadbd is allowed to run as root without --user, so we don't need it.
        cmd = [
            self._install_db,
            "--no-defaults",  # must be first: ignore /etc/mysql
            "--auth-root-authentication-method=normal",  # root@localhost, no password
            "--skip-test-db",
            *self._server_options(),
        ]
        log = self._path("install.log")
        with open(log, "wb") as out:
            # cwd: the script does `cd $basedir`-relative lookups; keep it
            # away from the caller's directory.
            result = subprocess.run(
                cmd, stdout=out, stderr=subprocess.STDOUT, cwd=str(self.tmpdir), timeout=120
            )
        if result.returncode != 0:
            raise MariaDBServerError(
                f"{os.path.basename(self._install_db)} failed ({result.returncode}):\n{_tail(log)}"
            )

    def _launch(self) -> None:
        """Start mariadbd and wait until it answers ``SELECT 1`` on the socket."""
        assert self.port is not None
        cmd = [
            self._mariadbd,
            "--no-defaults",  # must be first: ignore /etc/mysql
            *self._server_options(),
            f"--socket={self.socket_path}",
            f"--pid-file={self._path('mysqld.pid')}",
            f"--log-error={self.error_log}",
            f"--tmpdir={self.tmpdir}",
            f"--bind-address={self.host}",
            f"--port={self.port}",
            # restart() reuses the port; retry bind for a few seconds in case
            # it is momentarily unavailable.
            "--port-open-timeout=10",
            "--skip-log-bin",
            # mariadbd refuses to run as root unless told --user=root (CI runs
            # as root); as a normal user --user=<self> is accepted silently.
            f"--user={_current_user()}",
            # Match Debian's packaged defaults (which --no-defaults drops).
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            # Commits are written to the OS on every commit and fsynced about
            # once a second: survives SIGKILL of mariadbd (kill_hard), only an
            # OS crash could lose the last second.  Much faster for tests.
            "--innodb-flush-log-at-trx-commit=2",
        ]
        if self._console is None:
            self._console = open(self._path("console.log"), "ab")
        # Own session: a Ctrl-C in the test runner doesn't hit mariadbd
        # directly; we shut it down ourselves.
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._console,
            stderr=subprocess.STDOUT,
            cwd=str(self.tmpdir),
            start_new_session=True,
        )
        self._wait_ready()

    def _client_args(self, tool: str) -> list[str]:
        return [
            tool,
            "--no-defaults",
            "--protocol=socket",
            f"--socket={self.socket_path}",
            "--user=root",
            "--connect-timeout=2",
        ]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        probe = [*self._client_args(self._client), "--batch", "-e", "SELECT 1"]
        while True:
            assert self._proc is not None
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise MariaDBServerError(
                    f"mariadbd exited with code {code} during startup.\n"
                    f"--- error log tail ({self.error_log}) ---\n{_tail(self.error_log)}\n"
                    f"--- console ---\n{_tail(self._path('console.log'), 10)}"
                )
            if self.socket_path.exists():
                r = subprocess.run(probe, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
                # mariadbd binds the TCP port before it creates the socket
                # file (and aborts if the port is taken), so a successful
                # socket query also means TCP 127.0.0.1:port is listening.
                if r.returncode == 0:
                    return
            if time.monotonic() > deadline:
                tail = _tail(self.error_log)
                self.kill_hard()
                raise MariaDBServerError(
                    f"mariadbd not ready after {self.startup_timeout:.0f}s.\n"
                    f"--- error log tail ({self.error_log}) ---\n{tail}"
                )
            time.sleep(0.05)

    def _create_account(self) -> None:
        # Two accounts: 127.0.0.1 for TCP (what url() uses; no name
        # resolution), localhost for socket connections.
        stmts = []
        for host in ("127.0.0.1", "localhost"):
            acct = f"'{self.user}'@'{host}'"
            stmts.append(f"CREATE USER {acct} IDENTIFIED BY '{self.password}';")
            stmts.append(f"GRANT ALL PRIVILEGES ON *.* TO {acct} WITH GRANT OPTION;")
        self.execute_sql("\n".join(stmts))

    def _close_console(self) -> None:
        if self._console is not None:
            self._console.close()
            self._console = None

    def _atexit(self) -> None:
        # Last resort if a test run forgets stop(): don't leak servers/dirs.
        try:
            if self.is_running():
                self._proc.kill()  # type: ignore[union-attr]
                self._proc.wait(timeout=10)  # type: ignore[union-attr]
        except Exception:
            pass
        self._proc = None
        self._close_console()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)


# --------------------------------------------------------------------------
# Self-check:  python -m tests.support.mariadb_server
# --------------------------------------------------------------------------


async def _self_check(db: ThrowawayMariaDB) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    db.create_database("selfcheck")
    engine = create_async_engine(db.url("selfcheck"))
    try:
        async with engine.begin() as conn:
            version = (await conn.execute(text("SELECT VERSION()"))).scalar_one()
            print("SELECT VERSION() ->", version)
            await conn.execute(
                text(
                    "CREATE TABLE t (id INT PRIMARY KEY, status VARCHAR(8) NOT NULL, "
                    "updated_at DATETIME(6) NOT NULL)"
                )
            )
            await conn.execute(text("INSERT INTO t VALUES (1, 'a', '2024-01-02 03:04:05.123456')"))
            upd = text("UPDATE t SET status='b' WHERE id=1 AND status='a'")
            r1 = (await conn.execute(upd)).rowcount
            r2 = (await conn.execute(upd)).rowcount
            r3 = (await conn.execute(text("UPDATE t SET status=status WHERE id=1"))).rowcount
            ts = (await conn.execute(text("SELECT updated_at FROM t WHERE id=1"))).scalar_one()
        print(f"conditional UPDATE #1 rowcount = {r1} (expect 1)")
        print(f"conditional UPDATE #2 rowcount = {r2} (expect 0)")
        print(f"no-op UPDATE (SET status=status) rowcount = {r3} (1 = FOUND_ROWS semantics)")
        print(f"DATETIME(6) round-trip -> {ts!r}")
        assert (r1, r2) == (1, 0), (r1, r2)
        assert ts.microsecond == 123456, ts
    finally:
        await engine.dispose()
    db.drop_database("selfcheck")


def main() -> None:
    import asyncio

    print("mariadbd:", find_mariadbd(), "| running as", _current_user())
    t0 = time.monotonic()
    with ThrowawayMariaDB() as db:
        print(f"start() took {time.monotonic() - t0:.2f}s; url = {db.url()}")
        asyncio.run(_self_check(db))
        t1 = time.monotonic()
        db.kill_hard()
        db.restart()
        print(
            f"kill_hard()+restart() took {time.monotonic() - t1:.2f}s, "
            f"same port {db.port}: {db.execute_sql('SELECT 1').strip() == '1'}"
        )
        tmp = db.tmpdir
    print("temp dir removed:", tmp is not None and not tmp.exists())


if __name__ == "__main__":
    main()
