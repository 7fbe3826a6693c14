"""Persistence and replication helpers: replica sync, status, backup.

Import: ``from redisparts_app.services.persistence import wait_for_sync, backup``.

Resumable log processing (the book's chapter 4 example) is ``services.log_processing``.
Keys: ``rp:persist:{<uuid>}:sync``, the marker ``wait_for_sync`` writes (it expires).

- ``wait_for_sync(master, replica)`` writes a marker on the master and returns once the
  replica has it (WAIT, then the replica's offset and the marker); ``disk=True`` also waits
  for the replica's AOF (WAITAOF from Redis 7.2, INFO AOF fields before). Every earlier
  write of any connection precedes the marker, so it has arrived too. On timeout (seconds)
  ``policy="raise"`` raises ``ReplicationTimeout``, ``policy="warn"`` warns and returns False.
- ``server_status()``: persistence settings, last save, AOF state, replication role and lag
  of one server; ``node_statuses()``: of every node of a Redis Cluster.
- ``backup(dest)``: BGSAVE (with a progress callback), then a copy of the server's
  ``dump.rdb`` into ``dest`` (only for a server on this machine) and its ``.sha256`` file.

Async twins: ``await_for_sync``, ``aserver_status``, ``anode_statuses``,
``aserver_version``, on the same cores (``faces``); backup stays sync.
"""

import contextlib
import hashlib
import logging
import os
import stat
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from .. import faces, keys
from ..conf import app_settings
from ..connection import Client, is_cluster, resolve_async_client, resolve_client
from ..exceptions import BackupError, ReplicationTimeout
from ..validation import check_choice, check_seconds

__all__ = [
    "Backup",
    "anode_statuses",
    "aserver_status",
    "aserver_version",
    "await_for_sync",
    "backup",
    "node_statuses",
    "server_status",
    "server_version",
    "sha256_of",
    "wait_for_sync",
]

logger = logging.getLogger(__name__)

POLICIES = ("raise", "warn")
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


# --- replication ----------------------------------------------------------------------------


def server_version(client: Client) -> tuple[int, ...]:
    """Return the server version as a tuple of integers, e.g. (6, 2, 14)."""
    return faces.run(_server_version(), client)


async def aserver_version(client: Client) -> tuple[int, ...]:
    """The async twin of ``server_version`` (``client``: a redis.asyncio client)."""
    return await faces.arun(_server_version(), client)


def _server_version() -> faces.Op:
    def version(info: dict[str, Any]) -> tuple[int, ...]:
        text = str(info["redis_version"])
        return tuple(int(part) for part in text.split(".") if part.isascii() and part.isdigit())

    return faces.command("info", "server", then=version)


def wait_for_sync(
    master: Client,
    replica: Client,
    timeout: float = 1.0,
    *,
    policy: str = "raise",
    disk: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Return True once every write made so far on ``master`` is on ``replica``.

    ``timeout`` is in seconds. On timeout ``policy="raise"`` raises
    ReplicationTimeout; ``policy="warn"`` logs a warning and returns False.
    ``disk=True`` also waits for the replica's AOF (see the module docstring).
    """
    return faces.run(_wait_for_sync(replica, timeout, policy, disk, clock), master)


async def await_for_sync(
    master: Client,
    replica: Client,
    timeout: float = 1.0,
    *,
    policy: str = "raise",
    disk: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """The async twin of ``wait_for_sync`` (``master``, ``replica``: redis.asyncio
    clients); its pauses between looks at the replica block only this coroutine."""
    return await faces.arun(_wait_for_sync(replica, timeout, policy, disk, clock), master)


def _wait_for_sync(
    replica: Client, timeout: float, policy: str, disk: bool, clock: Callable[[], float]
) -> faces.Steps[bool]:
    """The core of wait_for_sync, run on the master (the replica's steps: ``faces.on``)."""
    check_choice(policy, "policy", POLICIES)
    check_seconds(timeout, "timeout")
    deadline = clock() + timeout
    marker = keys.make_key("persist", uuid.uuid4().hex, "sync")
    try:
        yield from _wait_replicated(replica, marker, deadline, clock)
        if disk:
            yield from _wait_replica_disk(replica, marker, deadline, clock)
    except ReplicationTimeout as exc:
        failure = ReplicationTimeout(timeout, exc.reason)
        if policy == "raise":
            raise failure from None
        logger.warning("%s", failure)
        return False
    finally:
        with contextlib.suppress(redis.ConnectionError):  # the marker expires on its own
            yield faces.command("delete", marker)
    return True


def _remaining_ms(deadline: float, clock: Callable[[], float]) -> int:
    return max(1, int((deadline - clock()) * 1000))


def _wait_replicated(
    replica: Client, marker: str, deadline: float, clock: Callable[[], float]
) -> faces.Steps[None]:
    # One connection for SET and WAIT (a pipeline): WAIT counts acks of its own
    # connection's writes.
    _, info, _acked = yield faces.pipeline(
        [
            faces.command("set", marker, b"1", ex=60),
            faces.command("info", "replication"),
            faces.command("execute_command", "WAIT", 1, _remaining_ms(deadline, clock)),
        ]
    )
    target = int(info["master_repl_offset"])
    # WAIT may be satisfied by another replica: confirm on this one.
    while True:
        try:
            state = yield faces.on(replica, faces.command("info", "replication"))
            if (
                state.get("master_link_status") == "up"
                and int(state.get("slave_repl_offset", -1)) >= target
                and (yield faces.on(replica, faces.command("exists", marker)))
            ):
                return
            reason = (
                f"replica link {state.get('master_link_status', 'absent')}, offset "
                f"{state.get('slave_repl_offset', '?')} of {target}"
            )
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            reason = f"replica unreachable: {exc}"
        if clock() >= deadline:
            raise ReplicationTimeout(0, reason)
        yield faces.sleep(0.01)


def _wait_replica_disk(
    replica: Client, marker: str, deadline: float, clock: Callable[[], float]
) -> faces.Steps[None]:
    if (yield _server_version()) >= (7, 2):
        # WAITAOF only times out on a replica without AOF: say so at once, as below.
        try:
            state = yield faces.on(replica, faces.command("info", "persistence"))
            aof_enabled = state.get("aof_enabled")
        except (redis.ConnectionError, redis.TimeoutError):
            aof_enabled = None  # unreachable: WAITAOF waits for it
        if aof_enabled == 0:
            raise ReplicationTimeout(0, "the replica has AOF disabled")
        # WAITAOF waits for its own connection's last write: the marker written again
        # on it, after every earlier write in the replication stream.
        _, acked = yield faces.pipeline(
            [
                faces.command("set", marker, b"1", ex=60),
                faces.command("execute_command", "WAITAOF", 0, 1, _remaining_ms(deadline, clock)),
            ]
        )
        if acked[1] < 1:
            raise ReplicationTimeout(0, "no replica confirmed its AOF fsync")
        return
    while True:
        try:
            state = yield faces.on(replica, faces.command("info", "persistence"))
            if not state.get("aof_enabled"):
                raise ReplicationTimeout(0, "the replica has AOF disabled")
            if state.get("aof_buffer_length") == 0 and state.get("aof_pending_bio_fsync") == 0:
                return
            reason = "the replica's AOF buffer or fsync is still pending"
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            reason = f"replica unreachable: {exc}"
        if clock() >= deadline:
            raise ReplicationTimeout(0, reason)
        yield faces.sleep(0.01)


# --- status ---------------------------------------------------------------------------------


def _config(*names: str, **route: Any) -> faces.Steps[dict[str, str | None]]:
    """CONFIG GET each name; None where CONFIG is renamed or refused (managed services)."""
    values: dict[str, str | None] = {}
    for name in names:
        try:
            raw = yield faces.command("config_get", name, **route)
        except redis.ResponseError:
            raw = {}
        value = raw.get(name)
        values[name] = value.decode() if isinstance(value, bytes) else value
    return values


def _iso(timestamp: int | None) -> str | None:
    if not timestamp or timestamp < 0:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


def node_statuses(*, client: Client | None = None) -> list[dict[str, Any]]:
    """Return ``server_status()`` of every server behind ``client``, each with its "node".

    Every node (primaries and replicas, by address) of a Redis Cluster client; the
    one server of any other client, "node" then being None.
    """
    client = resolve_client(client)
    return faces.run(_node_statuses(_nodes(client)), client)


async def anode_statuses(*, client: Client | None = None) -> list[dict[str, Any]]:
    """The async twin of ``node_statuses``."""
    client = resolve_async_client(client)
    if is_cluster(client):
        await client.initialize()  # an async cluster client learns its nodes on first use
    return await faces.arun(_node_statuses(_nodes(client)), client)


def _nodes(client: Client) -> list[Any] | None:
    """The nodes of a cluster client by name; None for a client of one server."""
    if not is_cluster(client):
        return None
    return sorted(client.get_nodes(), key=lambda node: node.name)


def _node_statuses(nodes: list[Any] | None) -> faces.Steps[list[dict[str, Any]]]:
    if nodes is None:
        return [{"node": None, **(yield from _server_status())}]
    statuses = []
    for node in nodes:
        # The cluster client sends each node's INFO and CONFIG GET to that node.
        statuses.append({"node": node.name, **(yield from _server_status(target_nodes=node))})
    return statuses


def server_status(*, client: Client | None = None) -> dict[str, Any]:
    """Return persistence and replication state as a JSON-serialisable dict.

    Of one server: given a Redis Cluster client, of the node its INFO reaches
    (see ``node_statuses`` for all of them).

    Lags: a master lists each replica's lag in bytes (its offset behind
    ``master_repl_offset``) and seconds since its last ack; a replica reports
    its link state and seconds since it last heard from the master.
    """
    return faces.run(_server_status(), resolve_client(client))


async def aserver_status(*, client: Client | None = None) -> dict[str, Any]:
    """The async twin of ``server_status``."""
    return await faces.arun(_server_status(), client)


def _server_status(**route: Any) -> faces.Steps[dict[str, Any]]:
    server = yield faces.command("info", "server", **route)
    persistence = yield faces.command("info", "persistence", **route)
    replication = yield faces.command("info", "replication", **route)
    config = yield from _config("save", "appendonly", "appendfsync", "dir", "dbfilename", **route)
    status: dict[str, Any] = {
        "version": str(server["redis_version"]),
        "save": config["save"],
        "appendonly": config["appendonly"],
        "appendfsync": config["appendfsync"],
        "dir": config["dir"],
        "dbfilename": config["dbfilename"],
        "last_save": _iso(persistence.get("rdb_last_save_time")),
        "changes_since_last_save": persistence.get("rdb_changes_since_last_save"),
        "bgsave_in_progress": bool(persistence.get("rdb_bgsave_in_progress")),
        "last_bgsave_status": persistence.get("rdb_last_bgsave_status"),
        "aof_enabled": bool(persistence.get("aof_enabled")),
        "aof_rewrite_in_progress": bool(persistence.get("aof_rewrite_in_progress")),
        "aof_last_write_status": persistence.get("aof_last_write_status"),
        "aof_current_size": persistence.get("aof_current_size"),
        "role": replication["role"],
    }
    if replication["role"] == "master":
        offset = int(replication.get("master_repl_offset", 0))
        replicas = []
        for index in range(int(replication.get("connected_slaves", 0))):
            entry = replication.get(f"slave{index}", {})
            replicas.append(
                {
                    "address": f"{entry.get('ip')}:{entry.get('port')}",
                    "state": entry.get("state"),
                    "lag_bytes": offset - int(entry.get("offset", 0)),
                    "lag_seconds": entry.get("lag"),
                }
            )
        status.update({"master_repl_offset": offset, "replicas": replicas})
    else:
        status.update(
            {
                "master": f"{replication.get('master_host')}:{replication.get('master_port')}",
                "master_link_status": replication.get("master_link_status"),
                "seconds_since_master_io": replication.get("master_last_io_seconds_ago"),
                "slave_repl_offset": replication.get("slave_repl_offset"),
            }
        )
    return status


# --- backup ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backup:
    """A snapshot copied by ``backup``."""

    path: Path
    checksum_path: Path
    sha256: str
    size: int  # bytes
    saved_at: datetime


def _is_local(client: Client) -> bool:
    pool = getattr(client, "connection_pool", None)
    if pool is None:  # a cluster client: no single server, no single dump.rdb
        raise BackupError("backup needs a client of one server, not of a Redis Cluster")
    kwargs = pool.connection_kwargs
    return "path" in kwargs or kwargs.get("host") in LOCAL_HOSTS


def _bgsave(client: Client, deadline: float, clock: Callable[[], float]) -> None:
    """Start a BGSAVE, waiting out a save or AOF rewrite already running."""
    while True:
        try:
            client.bgsave()
            return
        except redis.ResponseError as exc:
            # Busy: a save or a rewrite already runs; start ours once it is done.
            if "in progress" not in str(exc):
                raise BackupError(f"BGSAVE refused: {exc}") from exc
        if clock() > deadline:
            raise BackupError("a save or AOF rewrite kept the server busy; BGSAVE never started")
        time.sleep(0.05)


def backup(
    destination: str | os.PathLike,
    *,
    client: Client | None = None,
    timeout: float | None = None,
    progress: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Backup:
    """Snapshot the server with BGSAVE and copy the RDB file into ``destination``.

    ``timeout`` (seconds, default REDISPARTS["BACKUP_TIMEOUT"]) bounds the wait
    for BGSAVE; ``progress`` gets the save's percentage (0 to 100) while it runs.
    The copy is ``dump-<UTC time of the save>.rdb`` with a ``.sha256`` beside it.
    Raise BackupError when the server is remote, the save fails or the file
    cannot be read or written.
    """
    client = resolve_client(client)
    destination = Path(destination)
    if destination.exists() and not destination.is_dir():
        raise BackupError(f"{destination} exists and is not a directory")
    timeout = app_settings.BACKUP_TIMEOUT if timeout is None else timeout
    if not _is_local(client):
        host = client.connection_pool.connection_kwargs.get("host")
        raise BackupError(
            f"the server at {host} is not on this machine, so its RDB file cannot be copied "
            "from here; run the backup on the server's host"
        )
    config = faces.run(_config("dir", "dbfilename"), client)
    if not config["dir"] or not config["dbfilename"]:
        raise BackupError("CONFIG GET dir/dbfilename is not allowed; cannot locate the snapshot")
    source = Path(config["dir"]) / config["dbfilename"]
    deadline = clock() + timeout
    _bgsave(client, deadline, clock)
    while True:
        state = client.info("persistence")
        if not state["rdb_bgsave_in_progress"]:
            break
        if progress is not None:
            progress(float(state.get("current_fork_perc", 0.0)))
        if clock() > deadline:
            raise BackupError(f"BGSAVE still running after {timeout}s")
        time.sleep(0.05)
    if state["rdb_last_bgsave_status"] != "ok":
        raise BackupError("BGSAVE failed; see the server's log")
    if progress is not None:
        progress(100.0)
    saved_at = datetime.fromtimestamp(int(state["rdb_last_save_time"]), UTC)
    return _copy_snapshot(source, destination, saved_at)


def _copy_snapshot(source: Path, destination: Path, saved_at: datetime) -> Backup:
    name = f"dump-{saved_at:%Y%m%dT%H%M%SZ}.rdb"
    target = destination / name
    try:
        destination.mkdir(parents=True, exist_ok=True)
        # The server replaces dump.rdb by rename, so an open handle reads one whole snapshot.
        with source.open("rb") as src:
            if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                raise BackupError(f"{source} is not a regular file")
            digest = hashlib.sha256()
            with tempfile.NamedTemporaryFile(dir=destination, delete=False, suffix=".part") as tmp:
                try:
                    while chunk := src.read(1 << 20):
                        digest.update(chunk)
                        tmp.write(chunk)
                    tmp.flush()
                    os.fsync(tmp.fileno())
                except BaseException:
                    os.unlink(tmp.name)
                    raise
            os.replace(tmp.name, target)
        checksum = destination / f"{name}.sha256"
        checksum.write_text(f"{digest.hexdigest()}  {name}\n", encoding="ascii")
    except FileNotFoundError as exc:
        raise BackupError(f"snapshot not found at {source}: {exc}") from exc
    except OSError as exc:
        raise BackupError(f"cannot copy {source} to {destination}: {exc}") from exc
    return Backup(target, checksum, digest.hexdigest(), target.stat().st_size, saved_at)


def sha256_of(path: str | os.PathLike) -> str:
    """Return the SHA-256 hex digest of a file."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
