import io
import json
import logging
import os
import random
import signal
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio
from django.core.management import CommandError, call_command

from redisparts_app import keys
from redisparts_app.embedded import find_redis_server, server_version
from redisparts_app.exceptions import (
    BackupError,
    InvalidArgument,
    LogProgressConflict,
    ReplicationTimeout,
)
from redisparts_app.services import persistence
from redisparts_app.services.log_processing import LogProcessor
from redisparts_app.services.persistence import backup, sha256_of
from redisparts_app.testing import free_port, wait_until
from tests.processes import CONTEXT

pytestmark = pytest.mark.cluster

NAME = "access"


def _line_key(line: bytes) -> str:
    return keys.make_key("logproc", NAME, "line", line.strip().decode())


def count_line(pipe, line: bytes) -> None:
    """The recorded effect of a line: its own counter, which must end at exactly 1."""
    pipe.incr(_line_key(line))


def _write_lines(path: Path, start: int, stop: int, mode: str = "w") -> None:
    with path.open(mode) as handle:
        handle.writelines(f"line-{n:06d}\n" for n in range(start, stop))


def _counters(client, start: int, stop: int) -> list[int | None]:
    names = [_line_key(f"line-{n:06d}".encode()) for n in range(start, stop)]
    values = []
    for chunk in range(0, len(names), 1000):
        values += [None if v is None else int(v) for v in client.mget(names[chunk : chunk + 1000])]
    return values


def _all_line_counters(client) -> dict[bytes, int]:
    return {key: int(client.get(key)) for key in client.scan_iter(match="rp:logproc:*:line:*")}


# --- resumable log processing ---------------------------------------------------------------


def test_processes_each_line_once_and_resumes_after_appends(redis_client, tmp_path):
    log = tmp_path / "app.log"
    _write_lines(log, 0, 25)
    processor = LogProcessor(NAME, count_line, batch_size=10)
    result = processor.process_file(log)
    assert (result.lines, result.bytes, result.restarted) == (25, log.stat().st_size, [])
    assert processor.progress()["offset"] == str(log.stat().st_size)
    _write_lines(log, 25, 40, mode="a")
    assert LogProcessor(NAME, count_line).process_file(log).lines == 15
    assert LogProcessor(NAME, count_line).process_file(log).lines == 0
    assert _counters(redis_client, 0, 40) == [1] * 40
    assert len(_all_line_counters(redis_client)) == 40


def test_unterminated_last_line_waits_until_complete_or_final(redis_client, tmp_path):
    log = tmp_path / "app.log"
    log.write_bytes(b"line-000000\nline-00")
    assert LogProcessor(NAME, count_line).process_file(log).lines == 1
    with log.open("ab") as handle:
        handle.write(b"0001\nline-000002")
    assert LogProcessor(NAME, count_line).process_file(log).lines == 1
    assert LogProcessor(NAME, count_line).process_file(log, final=True).lines == 1
    assert _counters(redis_client, 0, 3) == [1, 1, 1]


def test_a_failing_callback_records_nothing_of_its_batch(redis_client, tmp_path):
    log = tmp_path / "app.log"
    _write_lines(log, 0, 30)

    def failing(pipe, line):
        if line == b"line-000015\n":
            raise RuntimeError("callback crashed")
        count_line(pipe, line)

    with pytest.raises(RuntimeError):
        LogProcessor(NAME, failing, batch_size=10).process_file(log)
    # The first batch committed with its progress; the second left no trace.
    assert _counters(redis_client, 0, 30) == [1] * 10 + [None] * 20
    assert LogProcessor(NAME, count_line).progress()["offset"] == str(10 * len("line-000000\n"))
    LogProcessor(NAME, count_line, batch_size=10).process_file(log)
    assert _counters(redis_client, 0, 30) == [1] * 30


def test_a_file_replaced_under_the_same_name_starts_from_the_beginning(redis_client, tmp_path):
    log = tmp_path / "app.log"
    _write_lines(log, 0, 20)
    LogProcessor(NAME, count_line).process_file(log)
    keep_inode_busy = log.open("rb")  # the old inode cannot be reused by the new file
    fresh = tmp_path / "app.log.new"
    _write_lines(fresh, 100, 130)
    os.replace(fresh, log)
    result = LogProcessor(NAME, count_line).process_file(log)
    keep_inode_busy.close()
    assert result.restarted == ["app.log: replaced"]
    assert result.lines == 30
    assert _counters(redis_client, 100, 130) == [1] * 30


def test_truncation_is_detected_even_when_the_file_grows_back(redis_client, tmp_path):
    log = tmp_path / "app.log"
    _write_lines(log, 0, 20)
    LogProcessor(NAME, count_line).process_file(log)
    _write_lines(log, 200, 205)  # same inode, shorter than the recorded offset
    result = LogProcessor(NAME, count_line).process_file(log)
    assert (result.restarted, result.lines) == (["app.log: truncated"], 5)
    _write_lines(log, 300, 340)  # same inode, longer again, different first bytes
    result = LogProcessor(NAME, count_line).process_file(log)
    assert (result.restarted, result.lines) == (["app.log: truncated"], 40)
    assert _counters(redis_client, 300, 340) == [1] * 40
    assert set(_all_line_counters(redis_client).values()) == {1}


def test_directory_resumes_at_the_recorded_file_and_skips_earlier_ones(redis_client, tmp_path):
    _write_lines(tmp_path / "2026-01-01.log", 0, 10)
    _write_lines(tmp_path / "2026-01-02.log", 10, 20)
    processor = LogProcessor(NAME, count_line, batch_size=4)
    assert processor.process_directory(tmp_path).lines == 20
    assert processor.progress()["file"] == "2026-01-02.log"
    _write_lines(tmp_path / "2026-01-02.log", 20, 25, mode="a")
    _write_lines(tmp_path / "2026-01-03.log", 25, 30)
    result = LogProcessor(NAME, count_line).process_directory(tmp_path)
    assert (result.files, result.lines) == (2, 10)
    assert _counters(redis_client, 0, 30) == [1] * 30


def test_two_processors_of_one_name_cannot_both_commit(redis_client, tmp_path):
    log = tmp_path / "app.log"
    _write_lines(log, 0, 10)
    other = tmp_path / "other.log"
    _write_lines(other, 50, 55)
    interfered = []

    def interfering(pipe, line):
        if not interfered:
            interfered.append(LogProcessor(NAME, count_line).process_file(other))
        count_line(pipe, line)

    with pytest.raises(LogProgressConflict):
        LogProcessor(NAME, interfering).process_file(log)
    assert _counters(redis_client, 0, 10) == [None] * 10
    assert _counters(redis_client, 50, 55) == [1] * 5


def test_bad_processor_arguments_are_refused(redis_client):
    with pytest.raises(InvalidArgument):
        LogProcessor("a:b", count_line)
    with pytest.raises(ValueError, match="batch_size"):
        LogProcessor(NAME, count_line, batch_size=0)


def _slow_count_line(pipe, line: bytes) -> None:
    time.sleep(0.0002)  # spreads the run over about a second, so kills land mid-file
    count_line(pipe, line)


def _process_until_killed(path: str) -> None:
    LogProcessor(NAME, _slow_count_line, batch_size=20).process_file(path, final=True)


def _recorded_offset(client) -> int:
    return int(client.hget(LogProcessor(NAME, count_line).progress_key, "offset") or 0)


@pytest.mark.slow
def test_killed_processor_resumes_with_every_line_recorded_exactly_once(redis_client, tmp_path):
    log = tmp_path / "big.log"
    lines = 5000
    _write_lines(log, 0, lines)
    size = log.stat().st_size
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    offsets_at_kill = []
    for target in sorted(rng.uniform(0.05, 0.9) * size for _ in range(4)):
        child = CONTEXT.Process(target=_process_until_killed, args=(str(log),), daemon=True)
        child.start()
        deadline = time.monotonic() + 30
        while _recorded_offset(redis_client) < target and child.is_alive():
            assert time.monotonic() < deadline, "the processor made no progress"
            time.sleep(rng.uniform(0.0, 0.01))
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        offsets_at_kill.append(_recorded_offset(redis_client))
    LogProcessor(NAME, count_line, batch_size=20).process_file(log, final=True)
    assert any(0 < offset < size for offset in offsets_at_kill), (seed, offsets_at_kill)
    assert _counters(redis_client, 0, lines) == [1] * lines, seed
    assert len(_all_line_counters(redis_client)) == lines


# --- replication ----------------------------------------------------------------------------


def _replica_ready(replica: redis.Redis) -> bool:
    """Link up, and the AOF rewrite a replica starts after its first sync is over.

    A replica refuses SIGTERM while it writes its initial AOF.
    """
    state = replica.info("persistence")
    return replica.info("replication").get("master_link_status") == "up" and not (
        state["aof_rewrite_in_progress"] or state["aof_rewrite_scheduled"]
    )


@pytest.fixture
def replication(redis_server_factory):
    """A master on TCP and a replica of it, linked; yields (master, replica) servers."""

    def start(*replica_args: str):
        master = redis_server_factory()
        replica = redis_server_factory(
            args=["--replicaof", "127.0.0.1", str(master.port), *replica_args]
        )
        client = replica.client()
        wait_until(lambda: _replica_ready(client), 20, "replica sync")
        return master, replica

    return start


@pytest.fixture
def face_clients(face):
    """``face_clients(*servers)``: a client of each server for the test's face (redis.asyncio
    on the async face, closed at the end)."""
    opened = []

    def clients(*servers):
        if not face.is_async:
            return [server.client() for server in servers]
        made = [redis.asyncio.Redis.from_url(server.url) for server in servers]
        opened.extend(made)
        return made

    yield clients
    for client in opened:
        face.run(client.aclose())


@pytest.fixture
def persist(face):
    """The persistence calls on the sync face, then on the async face (``await_for_sync``)."""
    return face(persistence)


@pytest.mark.slow
@pytest.mark.single_server  # servers of its own
def test_wait_for_sync_returns_once_the_writes_are_on_the_replica(
    replication, face_clients, persist
):
    master, replica = replication()
    master_client, replica_client = master.client(), replica.client()
    pipe = master_client.pipeline(transaction=False)
    for n in range(2000):
        pipe.set(f"key:{n}", n)
    pipe.execute()
    assert persist.wait_for_sync(*face_clients(master, replica), timeout=10) is True
    assert replica_client.get("key:1999") == b"1999"
    assert replica_client.dbsize() == 2000  # the marker is gone or never counted twice


@pytest.mark.slow
@pytest.mark.single_server  # servers of its own
def test_wait_for_sync_with_disk_waits_for_the_replica_aof(replication, face_clients, persist):
    master, replica = replication("--appendonly", "yes", "--appendfsync", "always")
    master.client().set("durable", "yes")
    assert persist.wait_for_sync(*face_clients(master, replica), timeout=10, disk=True) is True
    assert replica.client().get("durable") == b"yes"
    assert master.client().dbsize() == 1  # the marker, written twice, is gone


@pytest.mark.slow
@pytest.mark.single_server  # servers of its own
def test_wait_for_sync_on_a_stopped_replica_raises_or_warns_by_policy(
    replication, face_clients, persist, caplog
):
    master, replica = replication()
    master_client, replica_client = face_clients(master, replica)
    replica.stop()
    master.client().set("lost", "1")
    with pytest.raises(ReplicationTimeout, match=r"not replicated within 0\.3s"):
        persist.wait_for_sync(master_client, replica_client, timeout=0.3)
    with caplog.at_level(logging.WARNING):
        warned = persist.wait_for_sync(master_client, replica_client, timeout=0.3, policy="warn")
    assert warned is False
    assert "not replicated" in caplog.text
    assert master.client().dbsize() == 1  # the markers are gone


@pytest.mark.slow
@pytest.mark.single_server  # servers of its own
def test_wait_for_sync_with_disk_refuses_a_replica_without_aof(replication, face_clients, persist):
    master, replica = replication()
    with pytest.raises(ReplicationTimeout, match="AOF disabled"):
        persist.wait_for_sync(*face_clients(master, replica), timeout=0.5, disk=True)


def test_wait_for_sync_refuses_bad_arguments(redis_client, persist):
    # No client is needed: the arguments are checked before any call (None: the face's own).
    with pytest.raises(ValueError, match="policy"):
        persist.wait_for_sync(None, None, policy="ignore")
    with pytest.raises(ValueError, match="timeout"):
        persist.wait_for_sync(None, None, timeout=0)


# --- status ---------------------------------------------------------------------------------


@pytest.mark.single_server  # the session server
def test_status_of_the_test_server(redis_client, persist):
    status = persist.server_status()
    assert status["role"] == "master"
    binary = find_redis_server()
    # Valkey reports the Redis version it is compatible with as redis_version.
    expected = (7, 2, 4) if binary.name == "valkey-server" else server_version(binary)
    assert status["version"] == ".".join(map(str, expected))
    assert status["aof_enabled"] is False
    assert status["replicas"] == []
    assert Path(status["dir"]).is_dir()


@pytest.mark.slow
@pytest.mark.single_server  # servers of its own
def test_status_shows_replicas_and_the_replica_link(replication, face_clients, persist):
    master, replica = replication()
    master_client, replica_client = face_clients(master, replica)
    assert persist.server_version(master_client) == persistence.server_version(master.client())
    master_status = persist.server_status(client=master_client)
    assert [r["state"] for r in master_status["replicas"]] == ["online"]
    replica_status = persist.server_status(client=replica_client)
    assert replica_status["role"] == "slave"
    assert replica_status["master_link_status"] == "up"
    assert replica_status["master"] == f"127.0.0.1:{master.port}"


@pytest.mark.single_server  # the one-server output; the cluster's is tested below
def test_rp_status_prints_text_and_json(redis_client, capsys):
    call_command("rp_status")
    assert "role: master" in capsys.readouterr().out
    call_command("rp_status", "--json")
    assert json.loads(capsys.readouterr().out)["role"] == "master"


def test_node_statuses_and_rp_status_cover_every_node(redis_client, redis_backend, persist, capsys):
    statuses = persist.node_statuses()
    call_command("rp_status")
    text = capsys.readouterr().out
    call_command("rp_status", "--json")
    printed = json.loads(capsys.readouterr().out)
    if redis_backend == "server":
        assert [(s["node"], s["role"]) for s in statuses] == [(None, "master")]
        assert printed["role"] == "master"
        return
    # Every node of the cluster, primaries with their replica, each with its address.
    assert sorted(s["role"] for s in statuses) == ["master"] * 3 + ["slave"] * 3
    assert all(len(s["replicas"]) == 1 for s in statuses if s["role"] == "master")
    assert [s["node"] for s in printed] == [s["node"] for s in statuses]
    assert all(f"node: {s['node']}" in text for s in statuses)


def _dead_server_settings(settings):
    settings.REDISPARTS = {"CONNECTIONS": {"default": f"redis://127.0.0.1:{free_port()}/0"}}


@pytest.mark.single_server  # a dead server of its own
def test_rp_status_exits_3_when_redis_is_unreachable(settings):
    _dead_server_settings(settings)
    with pytest.raises(CommandError, match="cannot reach Redis") as failure:
        call_command("rp_status")
    assert failure.value.returncode == 3


# --- backup ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.single_server  # backup needs one server
def test_rp_backup_writes_a_snapshot_that_restores(redis_client, tmp_path, redis_server_factory):
    redis_client.set("precious", "data")
    progress, out = io.StringIO(), io.StringIO()
    call_command("rp_backup", str(tmp_path / "backups"), stdout=out, stderr=progress)
    assert "BGSAVE" in progress.getvalue()
    assert "100%" in progress.getvalue()
    assert "Saved" in out.getvalue()
    [snapshot] = (tmp_path / "backups").glob("dump-*.rdb")
    checksum = (tmp_path / "backups" / f"{snapshot.name}.sha256").read_text()
    assert checksum == f"{sha256_of(snapshot)}  {snapshot.name}\n"
    restored = redis_server_factory(
        args=["--dir", str(snapshot.parent), "--dbfilename", snapshot.name]
    )
    assert restored.client().get("precious") == b"data"


def test_backup_refuses_a_destination_that_is_a_file(redis_client, tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(CommandError, match="not a directory"):
        call_command("rp_backup", str(target), verbosity=0)


@pytest.mark.single_server  # no Redis call
def test_backup_refuses_a_remote_server_before_connecting(tmp_path):
    remote = redis.Redis(host="192.0.2.10", port=6380)
    with pytest.raises(BackupError, match="not on this machine"):
        backup(tmp_path, client=remote)


@pytest.mark.single_server  # a dead server of its own
def test_rp_backup_exits_3_when_redis_is_unreachable(settings, tmp_path):
    _dead_server_settings(settings)
    with pytest.raises(CommandError, match="cannot reach Redis") as failure:
        call_command("rp_backup", str(tmp_path), verbosity=0)
    assert failure.value.returncode == 3
