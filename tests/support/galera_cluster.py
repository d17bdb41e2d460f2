"""A throwaway three-node MariaDB Galera cluster on loopback, for tests and the bench.

Each node is a private ``mariadbd`` (``--no-defaults``, nothing read from /etc/mysql) with its own
data directory, unix socket, SQL port, Galera port, IST port and SST port, all on 127.0.0.1 and
all free ports the kernel handed out. The first node bootstraps the cluster
(``--wsrep-new-cluster``); the others join it by a state transfer (rsync). ``start()`` returns when
``wsrep_cluster_size`` is 3 and every node says Synced; then an ``eventbot`` account with a random
password is created on node 0, and replicates to the others.

**The servers run as the ``mysql`` user** when this process is root (CI is): run as root, the
rsync state transfer's daemon drops to ``nobody`` and cannot read ``ibdata1``, the joiners abort
and the cluster stays at size 1. So the data directories are chowned to ``mysql``, and the
directory holding them is made under a base every one of whose parents ``mysql`` may traverse. As a
normal user the servers simply run as that user.

Fault tests::

    cluster.kill_hard(1)   # SIGKILL node 1; its data directory is kept
    cluster.restart(1)     # same ports and data; it rejoins (IST when the others' gcache still
                           # holds what it missed, else a full SST) and is Synced on return

Self-check::

    .venv/bin/python -m tests.support.galera_cluster
"""

from __future__ import annotations

import atexit
import grp
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from tests.support.mariadb_server import MariaDBServerError, _free_port, _require, _tail

__all__ = ["GaleraCluster", "GaleraError", "find_galera_provider"]

PROVIDER_PATHS = (
    "/usr/lib/galera/libgalera_smm.so",
    "/usr/lib/galera-4/libgalera_smm.so",
    "/usr/lib64/galera-4/libgalera_smm.so",
    "/usr/lib64/galera/libgalera_smm.so",
    "/usr/lib/libgalera_smm.so",
)
SERVER_USER = "mysql"
NODES = 3
_RECOVERED = re.compile(r"WSREP: Recovered position:?\s+([0-9a-f-]{36}):(-?\d+)")


class GaleraError(MariaDBServerError):
    """The cluster could not be installed, started, joined or stopped."""


def find_galera_provider() -> str | None:
    """The wsrep provider library (Debian's galera-4 package), or None."""
    for path in PROVIDER_PATHS:
        if os.path.isfile(path):
            return path
    return None


def _traversable_by(path: Path, uid: int, gids: set[int]) -> bool:
    """Whether the user (uid, groups) may reach ``path``: search permission on it and every parent."""
    for part in [path, *path.parents]:
        info = part.stat()
        if info.st_uid == uid:
            bit = stat.S_IXUSR
        elif info.st_gid in gids:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            return False
    return True


@dataclass
class Node:
    index: int
    dir: Path
    port: int
    galera_port: int
    ist_port: int
    sst_port: int
    proc: subprocess.Popen[bytes] | None = None
    console: IO[bytes] | None = None
    #: seconds each (re)start took to reach Synced
    starts: list[float] = field(default_factory=list)

    @property
    def datadir(self) -> Path:
        return self.dir / "data"

    @property
    def socket_path(self) -> Path:
        return self.dir / "mysqld.sock"

    @property
    def error_log(self) -> Path:
        return self.dir / "error.log"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class GaleraCluster:
    """Three private Galera nodes; ``start()`` / ``stop()``, or a context manager."""

    host = "127.0.0.1"

    def __init__(
        self,
        *,
        nodes: int = NODES,
        user: str = "eventbot",
        join_timeout: float = 120.0,
        base_dir: str | None = None,
        verbose: bool = True,
    ) -> None:
        self.size = nodes
        self.user = user
        self.password = secrets.token_hex(16)
        self.join_timeout = join_timeout
        self.verbose = verbose
        self._base_dir = base_dir
        self.tmpdir: Path | None = None
        self.nodes: list[Node] = []
        self.cluster_name = f"eventbot-{secrets.token_hex(4)}"
        #: seconds the whole start() took
        self.started_in: float | None = None

        provider = find_galera_provider()
        if provider is None:
            raise GaleraError(
                f"no Galera provider library (looked for {', '.join(PROVIDER_PATHS)}); install galera-4"
            )
        self.provider = provider
        self._mariadbd = _require("server (mariadbd)", "mariadbd", "mysqld")
        self._install_db = _require("installer", "mariadb-install-db", "mysql_install_db")
        self._client = _require("client", "mariadb", "mysql")
        if shutil.which("rsync") is None:
            raise GaleraError("no rsync on PATH: the joiners' state transfer needs it (install rsync)")
        self._as_root = os.geteuid() == 0
        if self._as_root:
            try:
                account = pwd.getpwnam(SERVER_USER)
            except KeyError:
                raise GaleraError(
                    f"running as root, but there is no {SERVER_USER!r} user to run the servers as "
                    "(the mariadb-server package creates it)"
                ) from None
            self._uid, self._gid = account.pw_uid, account.pw_gid
            self._server_user = SERVER_USER
            self._gids = {self._gid} | {g.gr_gid for g in grp.getgrall() if SERVER_USER in g.gr_mem}
        else:
            self._uid, self._gid = os.geteuid(), os.getegid()
            self._server_user = pwd.getpwuid(self._uid).pw_name
            self._gids = set(os.getgroups()) | {self._gid}

    # ---- public API -----------------------------------------------------

    def url(self, node: int, database: str | None = None) -> str:
        """SQLAlchemy URL (asyncmy) for the test account on ``node``."""
        return (
            f"mysql+asyncmy://{quote(self.user, safe='')}:{quote(self.password, safe='')}"
            f"@{self.host}:{self.nodes[node].port}/{database or ''}?charset=utf8mb4"
        )

    def urls(self, database: str | None = None) -> list[str]:
        return [self.url(i, database) for i in range(self.size)]

    def start(self) -> GaleraCluster:
        began = time.monotonic()
        self._make_tmpdir()
        try:
            self._plan_nodes()
            self._install()
            self._launch(self.nodes[0], bootstrap=True)
            self._wait_synced(self.nodes[0])
            for node in self.nodes[1:]:
                self._launch(node)
            for node in self.nodes[1:]:
                self._wait_synced(node)
            self._wait_size(self.size)
            self._create_account()
        except BaseException:
            self.stop()
            raise
        atexit.register(self.stop)
        self.started_in = time.monotonic() - began
        self._log(
            f"{self.size} nodes synced in {self.started_in:.1f}s on ports "
            + ", ".join(str(n.port) for n in self.nodes)
        )
        return self

    def stop(self) -> None:
        """SIGKILL every node (nothing here needs a clean shutdown) and delete every directory."""
        for node in self.nodes:
            self._kill(node)
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
        atexit.unregister(self.stop)

    def kill_hard(self, index: int) -> None:
        """SIGKILL one node: a crash. The others lose it from the cluster's view within seconds."""
        self._kill(self.nodes[index])
        self._log(f"node {index} SIGKILLed")

    def restart(self, index: int) -> float:
        """Start a stopped node again on its own ports and data; return when it is Synced and the
        cluster is whole again. Returns the seconds it took."""
        node = self.nodes[index]
        if node.running():
            raise GaleraError(f"node {index} is still running")
        began = time.monotonic()
        position = self._recover_position(node)
        self._launch(node, start_position=position)
        self._wait_synced(node)
        self._wait_size(self.size)
        took = time.monotonic() - began
        self._log(f"node {index} rejoined in {took:.1f}s (recovered position {position})")
        return took

    def node_state(self, index: int) -> dict[str, str]:
        """The node's wsrep state and cluster size ({} when it does not answer)."""
        return self._wsrep(self.nodes[index])

    def status(self, index: int, *names: str) -> dict[str, str]:
        """``SHOW GLOBAL STATUS`` values on one node (e.g. ``wsrep_local_cert_failures``)."""
        wanted = ",".join(f"'{n}'" for n in names)
        out = self.execute_sql(index, f"SHOW GLOBAL STATUS WHERE Variable_name IN ({wanted})")
        return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)

    def execute_sql(self, index: int, sql: str, timeout: float = 30.0) -> str:
        """Run SQL as MariaDB root over node ``index``'s socket; its tab-separated stdout."""
        result = subprocess.run(
            [*self._client_args(self.nodes[index]), "--batch", "--skip-column-names"],
            input=sql.encode(),
            capture_output=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise GaleraError(
                f"node {index}: mariadb client failed ({result.returncode}): "
                f"{result.stderr.decode(errors='replace').strip()}\nSQL: {sql}"
            )
        return result.stdout.decode(errors="replace")

    def __enter__(self) -> GaleraCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- internals ------------------------------------------------------

    def _log(self, message: str) -> None:
        if self.verbose:
            print(f"[galera_cluster] {message}", file=sys.stderr, flush=True)

    def _make_tmpdir(self) -> None:
        base = Path(self._base_dir or tempfile.gettempdir()).resolve()
        if not _traversable_by(base, self._uid, self._gids):
            # TMPDIR under /root, say: the servers' user could not reach its own data directory.
            if self._base_dir is None and _traversable_by(Path("/tmp"), self._uid, self._gids):
                base = Path("/tmp")
            else:
                raise GaleraError(
                    f"{base}: the {self._server_user!r} user cannot reach it (a parent directory lacks "
                    "search permission); pass base_dir= a directory it can reach"
                )
        self.tmpdir = Path(tempfile.mkdtemp(prefix="eventbot-galera-", dir=base))
        self.tmpdir.chmod(0o755)
        self._own(self.tmpdir)

    def _own(self, path: Path) -> None:
        if not self._as_root:
            return
        os.chown(path, self._uid, self._gid)
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                os.chown(os.path.join(root, name), self._uid, self._gid, follow_symlinks=False)

    def _plan_nodes(self) -> None:
        assert self.tmpdir is not None
        ports: set[int] = set()
        self.nodes = []
        for index in range(self.size):
            picked = []
            while len(picked) < 4:
                port = _free_port()
                if port not in ports:
                    ports.add(port)
                    picked.append(port)
            directory = self.tmpdir / f"node{index}"
            directory.mkdir(mode=0o755)
            self.nodes.append(Node(index, directory, *picked))

    def _install(self) -> None:
        """One ``mariadb-install-db``, copied to every node: the joiners' data is replaced by their
        state transfer anyway, and a copy is seconds faster than two more installs."""
        first = self.nodes[0]
        # No --user: as root, mariadb-install-db would chown a *system* plugin directory to it.
        command = [
            self._install_db,
            "--no-defaults",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            f"--datadir={first.datadir}",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=32M",
            "--innodb-log-file-size=16M",
        ]
        log = first.dir / "install.log"
        with open(log, "wb") as out:
            result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=first.dir, timeout=120)
        if result.returncode != 0:
            raise GaleraError(f"mariadb-install-db failed ({result.returncode}):\n{_tail(log)}")
        for node in self.nodes[1:]:
            shutil.copytree(first.datadir, node.datadir, symlinks=True)
        assert self.tmpdir is not None
        self._own(self.tmpdir)

    def _server_options(self, node: Node) -> list[str]:
        members = ",".join(f"{self.host}:{n.galera_port}" for n in self.nodes)
        provider_options = ";".join(
            [
                f"gmcast.listen_addr=tcp://{self.host}:{node.galera_port}",
                f"ist.recv_addr={self.host}:{node.ist_port}",
                "gcache.size=64M",
                # A SIGKILLed node is dropped from the view in a few seconds, not the default 15+,
                # so the survivors' commits are not held up long by a member that is gone.
                "evs.keepalive_period=PT0.5S",
                "evs.suspect_timeout=PT3S",
                "evs.inactive_check_period=PT0.5S",
                "evs.inactive_timeout=PT6S",
                "evs.install_timeout=PT6S",
            ]
        )
        return [
            self._mariadbd,
            "--no-defaults",
            f"--datadir={node.datadir}",
            f"--socket={node.socket_path}",
            f"--pid-file={node.dir / 'mysqld.pid'}",
            f"--log-error={node.error_log}",
            f"--tmpdir={node.dir}",
            f"--bind-address={self.host}",
            f"--port={node.port}",
            "--port-open-timeout=10",
            f"--user={self._server_user}",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=32M",
            "--innodb-log-file-size=16M",
            "--innodb-log-buffer-size=4M",
            "--innodb-flush-log-at-trx-commit=2",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--performance-schema=OFF",
            # What Galera requires of every node.
            "--binlog-format=ROW",
            "--default-storage-engine=InnoDB",
            "--innodb-autoinc-lock-mode=2",
            "--wsrep-on=ON",
            f"--wsrep-provider={self.provider}",
            f"--wsrep-cluster-name={self.cluster_name}",
            f"--wsrep-cluster-address=gcomm://{members}",
            f"--wsrep-node-address={self.host}",
            f"--wsrep-node-name=node{node.index}",
            f"--wsrep-provider-options={provider_options}",
            f"--wsrep-sst-receive-address={self.host}:{node.sst_port}",
            "--wsrep-sst-method=rsync",
        ]

    def _launch(self, node: Node, *, bootstrap: bool = False, start_position: str | None = None) -> None:
        command = self._server_options(node)
        if bootstrap:
            command.append("--wsrep-new-cluster")
        if start_position:
            command.append(f"--wsrep-start-position={start_position}")
        if node.console is None:
            node.console = open(node.dir / "console.log", "ab")  # closed in _kill
        node.proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=node.console,
            stderr=subprocess.STDOUT,
            cwd=node.dir,
            start_new_session=True,
            # The state-transfer scripts (wsrep_sst_rsync) look for their tools on PATH.
            env={**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/bin"},
        )

    def _recover_position(self, node: Node) -> str | None:
        """What the node had committed before it died (``--wsrep-recover``), so it rejoins by IST."""
        log = node.dir / "recover.log"
        command = [*self._server_options(node), f"--log-error={log}", "--wsrep-recover"]
        subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, cwd=node.dir, timeout=60)
        found = _RECOVERED.findall(log.read_text(errors="replace")) if log.exists() else []
        if not found:
            return None
        uuid, seqno = found[-1]
        return None if int(seqno) < 0 else f"{uuid}:{seqno}"

    def _client_args(self, node: Node) -> list[str]:
        return [
            self._client,
            "--no-defaults",
            "--protocol=socket",
            f"--socket={node.socket_path}",
            "--user=root",
            "--connect-timeout=2",
        ]

    def _query(self, node: Node, sql: str) -> str | None:
        if not node.socket_path.exists():
            return None
        result = subprocess.run(
            [*self._client_args(node), "--batch", "--skip-column-names", "-e", sql],
            capture_output=True,
            timeout=10,
        )
        return result.stdout.decode(errors="replace") if result.returncode == 0 else None

    def _wsrep(self, node: Node) -> dict[str, str]:
        out = self._query(
            node,
            "SHOW GLOBAL STATUS WHERE Variable_name IN "
            "('wsrep_local_state_comment','wsrep_cluster_size','wsrep_ready','wsrep_cluster_status')",
        )
        return dict(line.split("\t", 1) for line in (out or "").splitlines() if "\t" in line)

    def _wait_synced(self, node: Node) -> None:
        began = time.monotonic()
        deadline = began + self.join_timeout
        while True:
            assert node.proc is not None
            code = node.proc.poll()
            if code is not None:
                node.proc = None
                raise GaleraError(
                    f"node {node.index} exited with code {code} while starting.\n"
                    f"--- error log tail ({node.error_log}) ---\n{_tail(node.error_log, 60)}"
                )
            state = self._wsrep(node)
            if (
                state.get("wsrep_local_state_comment") == "Synced"
                and state.get("wsrep_ready") == "ON"
                and state.get("wsrep_cluster_status") == "Primary"
            ):
                node.starts.append(time.monotonic() - began)
                return
            if time.monotonic() > deadline:
                raise GaleraError(
                    f"node {node.index} not Synced after {self.join_timeout:.0f}s (state {state}).\n"
                    f"--- error log tail ({node.error_log}) ---\n{_tail(node.error_log, 60)}"
                )
            time.sleep(0.1)

    def _wait_size(self, size: int) -> None:
        deadline = time.monotonic() + self.join_timeout
        while True:
            sizes = [self._wsrep(n).get("wsrep_cluster_size") for n in self.nodes if n.running()]
            if sizes and all(s == str(size) for s in sizes):
                return
            if time.monotonic() > deadline:
                raise GaleraError(f"cluster size never reached {size}: the nodes say {sizes}")
            time.sleep(0.1)

    def _create_account(self) -> None:
        statements = []
        for host in ("127.0.0.1", "localhost"):
            account = f"'{self.user}'@'{host}'"
            statements.append(f"CREATE USER {account} IDENTIFIED BY '{self.password}';")
            statements.append(f"GRANT ALL PRIVILEGES ON *.* TO {account} WITH GRANT OPTION;")
        self.execute_sql(0, "\n".join(statements))
        # DDL replicates in total order, but wait until every node can authenticate it anyway.
        deadline = time.monotonic() + 10
        for node in self.nodes[1:]:
            while not (
                self._query(node, f"SELECT user FROM mysql.user WHERE user='{self.user}' LIMIT 1") or ""
            ).strip():
                if time.monotonic() > deadline:
                    raise GaleraError(f"the {self.user} account never reached node {node.index}")
                time.sleep(0.05)

    def _kill(self, node: Node) -> None:
        proc = node.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the server and any state-transfer child
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)
        node.proc = None
        if node.console is not None:
            node.console.close()
            node.console = None
        # The pid file and socket of a killed server stay behind; the next start replaces them.


# --------------------------------------------------------------------------
# Self-check:  python -m tests.support.galera_cluster
# --------------------------------------------------------------------------


def main() -> None:
    began = time.monotonic()
    with GaleraCluster() as cluster:
        print(f"cluster up in {time.monotonic() - began:.1f}s; joins {[n.starts for n in cluster.nodes]}")
        cluster.execute_sql(0, "CREATE DATABASE t; CREATE TABLE t.x (id INT PRIMARY KEY, v INT);")
        cluster.execute_sql(1, "INSERT INTO t.x VALUES (1, 1);")
        print("row on node 2:", cluster.execute_sql(2, "SELECT v FROM t.x WHERE id=1").strip())
        cluster.kill_hard(2)
        cluster.execute_sql(0, "INSERT INTO t.x VALUES (2, 2);")
        took = cluster.restart(2)
        print(
            f"node 2 rejoined in {took:.1f}s; sees",
            cluster.execute_sql(2, "SELECT COUNT(*) FROM t.x").strip(),
        )
        info: dict[str, Any] = cluster.status(0, "wsrep_cluster_size", "wsrep_local_cert_failures")
        print("status:", info)
        tmp = cluster.tmpdir
    print("temp dir removed:", tmp is not None and not tmp.exists())


if __name__ == "__main__":
    main()
