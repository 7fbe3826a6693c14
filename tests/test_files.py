import gzip
import hashlib
import io
import random
import struct
import threading
import time
import zlib
from pathlib import Path

import pytest
import redis
from django.core.management import CommandError, call_command
from hypothesis import given
from hypothesis import strategies as st

from redisparts_app.exceptions import (
    ChatExists,
    CorruptFile,
    DistributionTimeout,
    FileTooLarge,
    InvalidArgument,
    NotChatMember,
)
from redisparts_app.keys import scan_keys
from redisparts_app.services import files, registry
from redisparts_app.services.files import (
    copy_logs_to_redis,
    file_keys,
    gunzip,
    process_logs_from_redis,
    split_lines,
)
from tests.processes import run_in_processes

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent
FAST = {"poll_interval": 0.005, "wait_timeout": 60}


def gzip_member(data: bytes, *, name=b"", extra=b"", comment=b"", header_crc=False) -> bytes:
    """One gzip member built by hand (RFC 1952), with the optional header fields asked for."""
    flags = (2 if header_crc else 0) | (4 if extra else 0) | (8 if name else 0)
    flags |= 16 if comment else 0
    header = struct.pack("<BBBBIBB", 0x1F, 0x8B, 8, flags, 1_700_000_000, 0, 3)
    if extra:
        header += struct.pack("<H", len(extra)) + extra
    if name:
        header += name + b"\0"
    if comment:
        header += comment + b"\0"
    if header_crc:
        header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(data) + deflate.flush()
    return header + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


class Collector:
    """Line callback and per-file flush that keep the lines of every flushed file."""

    def __init__(self):
        self.current: list[bytes] = []
        self.files: dict[str, list[bytes]] = {}

    def __call__(self, line: bytes) -> None:
        self.current.append(line)

    def flush(self, name: str) -> None:
        self.files[name] = self.current
        self.current = []


def distribute(folder: Path, channel: str = "logs", *, limit: int = 1 << 30, **options):
    """Upload in a thread and process as processor "0" here; return the collector."""
    block_size = options.pop("block_size", None)
    failures: list[BaseException] = []

    def upload():
        try:
            copy_logs_to_redis(folder, channel, processors=1, limit=limit, **FAST, **options)
        except BaseException as exc:
            failures.append(exc)

    uploader = threading.Thread(target=upload)
    uploader.start()
    collector = Collector()
    try:
        process_logs_from_redis(
            channel, "0", collector, collector.flush, block_size=block_size, **FAST
        )
    finally:
        uploader.join(60)
    assert not failures, failures
    return collector


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def log_lines(count: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    return b"".join(
        f"{rng.randrange(1, 224)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}"
        f" 2026-11-{rng.randrange(1, 29):02d} GET /item/{n}\n".encode()
        for n in range(count)
    )


def _book_role(role: str, folder: str, limit: int):
    if role == "upload":
        return copy_logs_to_redis(folder, "book", processors=1, limit=limit, **FAST).files
    counts: dict[str, int] = {}
    current = [0]

    def line(_: bytes) -> None:
        current[0] += 1

    def flush(name: str) -> None:
        counts[name], current[0] = current[0], 0

    process_logs_from_redis("book", "0", line, flush, **FAST)
    return counts


@pytest.mark.slow
def test_book_scenario_counts_every_line_of_plain_and_gzip_files(tmp_path, redis_client):
    write(tmp_path, "temp-1.txt", log_lines(1))
    write(tmp_path, "temp-2.txt", log_lines(10_000, seed=2))
    write(tmp_path, "temp-3.txt.gz", gzip.compress(log_lines(100_000, seed=3)))
    limit = sum(p.stat().st_size for p in tmp_path.iterdir()) + 1
    jobs = [("upload", str(tmp_path), limit), ("process", str(tmp_path), limit)]
    uploaded, counts = run_in_processes(_book_role, jobs, timeout=120)
    assert uploaded == 3
    assert counts == {"temp-1.txt": 1, "temp-2.txt": 10_000, "temp-3.txt.gz": 100_000}
    assert redis_client.dbsize() == 0  # files and chat cleaned up


def test_lines_spanning_blocks_and_chunks_arrive_whole(tmp_path):
    data = b"".join(b"x" * n + b"\n" for n in (0, 1, 2, 3, 7, 15, 16, 17, 40)) + b"\n\n"
    write(tmp_path, "a.log", data)
    collector = distribute(tmp_path, chunk_size=16, block_size=5)
    assert collector.files["a.log"] == data.splitlines(keepends=True)


def test_last_line_without_newline_and_empty_file(tmp_path, redis_client):
    write(tmp_path, "1-tail.log", b"first\nsecond\nno newline at the end")
    write(tmp_path, "2-empty.log", b"")
    write(tmp_path, "3-one.log", b"only")
    collector = distribute(tmp_path, chunk_size=8, block_size=3)
    assert collector.files == {
        "1-tail.log": [b"first\n", b"second\n", b"no newline at the end"],
        "2-empty.log": [],
        "3-one.log": [b"only"],
    }
    assert redis_client.dbsize() == 0


def test_gzip_is_recognised_by_its_magic_bytes_not_its_name(tmp_path):
    write(tmp_path, "compressed.log", gzip.compress(b"a\nb\n"))
    write(tmp_path, "plain.gz", b"not compressed\n")
    collector = distribute(tmp_path)
    assert collector.files == {
        "compressed.log": [b"a\n", b"b\n"],
        "plain.gz": [b"not compressed\n"],
    }


def test_gzip_header_fields_and_two_members(tmp_path):
    first = gzip_member(b"one\ntw", name=b"first.log", comment=b"made by hand", header_crc=True)
    second = gzip_member(b"o\nthree\n", extra=b"AB\x04\x00data", comment=b"second member")
    assert gzip.decompress(first + second) == b"one\ntwo\nthree\n"  # a valid gzip stream
    write(tmp_path, "members.gz", first + second + b"\0" * 8)
    collector = distribute(tmp_path, chunk_size=11, block_size=4)
    assert collector.files["members.gz"] == [b"one\n", b"two\n", b"three\n"]


def test_non_utf8_bytes_pass_through_unchanged(tmp_path):
    raw = b"caf\xe9 \xff\xfe\x00\r\n\x80\x81 \xc3\x28\n\xf0\x9f\x98\x80 tail\r"
    write(tmp_path, "latin.log", raw)
    write(tmp_path, "latin.log.gz", gzip.compress(raw))
    collector = distribute(tmp_path, block_size=3)
    expected = [b"caf\xe9 \xff\xfe\x00\r\n", b"\x80\x81 \xc3\x28\n", b"\xf0\x9f\x98\x80 tail\r"]
    assert collector.files == {"latin.log": expected, "latin.log.gz": expected}


def _uploaded(redis_client, channel: str, number: int, chunks: int) -> tuple[str, list[str]]:
    """Wait until file ``number`` of ``channel`` has been copied; return its keys."""
    done_key, chunk_keys = file_keys(channel, number, chunks)
    for _ in range(3000):
        if redis_client.exists(done_key):
            return done_key, chunk_keys
        threading.Event().wait(0.01)
    raise AssertionError("the uploader never copied the file")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda client, key: client.setrange(key, 3, b"X"), "SHA-256 mismatch"),
        (lambda client, key: client.delete(key), "chunk 1 holds 0 bytes where 10 were written"),
    ],
)
def test_a_damaged_chunk_is_detected_before_flush(tmp_path, redis_client, damage, message):
    write(tmp_path, "a.log", b"0123456789" * 3)
    failures = []

    def upload():
        try:
            copy_logs_to_redis(
                tmp_path, "bad", processors=1, limit=100, chunk_size=10, poll_interval=0.01,
                wait_timeout=2,
            )  # fmt: skip
        except DistributionTimeout as exc:
            failures.append(exc)

    uploader = threading.Thread(target=upload)
    uploader.start()
    done_key, chunk_keys = _uploaded(redis_client, "bad", 1, 3)
    damage(redis_client, chunk_keys[1])
    collector = Collector()
    with pytest.raises(CorruptFile, match=message):
        process_logs_from_redis("bad", "0", collector, collector.flush, **FAST)
    assert collector.files == {}
    assert redis_client.get(done_key) == b"0"  # not reported finished
    uploader.join(30)
    # The uploader waits for a file nobody finishes, then gives up and cleans up.
    assert len(failures) == 1
    assert redis_client.dbsize() == 0


SIZES = [30_000, 12_000, 45_000, 1, 0, 20_000, 38_000, 25_000]
LIMIT, CHUNK = 70_000, 4096


def _many_files(folder: Path) -> dict[str, bytes]:
    """Files of SIZES (odd ones gzip-compressed); return name -> uncompressed content."""
    contents = {}
    for n, size in enumerate(SIZES):
        rng = random.Random(n)
        text = bytes(rng.choice(b"abcdefgh \n\xff") for _ in range(size))
        name = f"f{n}.log"
        if n % 2:
            write(folder, name, gzip.compress(text))
        else:
            write(folder, name, text)
        contents[name] = text
    return contents


def _spread_role(role: str, folder: str, processor: str):
    if role == "upload":
        report = copy_logs_to_redis(
            folder, "spread", processors=3, limit=LIMIT, chunk_size=CHUNK, **FAST
        )
        return report.most_held
    # The uploader fills Redis up to the limit first, so the sampler finds bytes held
    # however fast the processors would empty it.
    time.sleep(0.3)
    digests: dict[str, tuple[int, str]] = {}
    current = [0, hashlib.sha256()]

    def line(data: bytes) -> None:
        current[0] += 1
        current[1].update(data)

    def flush(name: str) -> None:
        digests[name] = (current[0], current[1].hexdigest())
        current[:] = [0, hashlib.sha256()]

    process_logs_from_redis("spread", processor, line, flush, block_size=1000, **FAST)
    return digests


@pytest.mark.slow
@pytest.mark.single_server  # MULTI snapshot across files
def test_three_processor_processes_each_see_every_file_within_the_limit(tmp_path, redis_client):
    contents = _many_files(tmp_path)
    # More than the limit in all, so the uploader has to wait for processed files.
    assert sum(path.stat().st_size for path in tmp_path.iterdir()) > 2 * LIMIT
    chunk_keys = []
    for n, path in enumerate(sorted(tmp_path.iterdir()), start=1):
        chunk_keys += file_keys("spread", n, -(-path.stat().st_size // CHUNK))[1]
    samples: list[int] = []
    stop = threading.Event()

    # A pool of its own: a fork while this thread holds the shared pool's lock would
    # leave the child's copy of that lock held.
    shared = redis_client.connection_pool
    own_pool = redis.ConnectionPool(
        connection_class=shared.connection_class, **shared.connection_kwargs
    )
    client = redis.Redis(connection_pool=own_pool)

    def sample():
        while not stop.is_set():
            pipe = client.pipeline(transaction=True)  # one consistent snapshot
            for key in chunk_keys:
                pipe.strlen(key)
            samples.append(sum(pipe.execute()))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        jobs = [("upload", str(tmp_path), "")] + [
            ("process", str(tmp_path), str(n)) for n in range(3)
        ]
        most_held, *seen = run_in_processes(_spread_role, jobs, timeout=120)
    finally:
        stop.set()
        sampler.join(10)
        own_pool.disconnect()
    expected = {
        name: (len(text.splitlines(keepends=True)), hashlib.sha256(text).hexdigest())
        for name, text in contents.items()
    }
    assert seen == [expected] * 3
    assert most_held <= LIMIT
    assert max(samples) <= LIMIT
    assert max(samples) > 0
    assert redis_client.dbsize() == 0


def test_uploader_bad_input_writes_nothing(tmp_path, redis_client):
    write(tmp_path, "small.log", b"x\n")
    write(tmp_path, "big.log", b"y" * 101)
    with pytest.raises(FileTooLarge, match=r"big\.log is 101 bytes, more than the limit of 100"):
        copy_logs_to_redis(tmp_path, "c", processors=1, limit=100)
    with pytest.raises(NotADirectoryError):
        copy_logs_to_redis(tmp_path / "missing", "c", processors=1, limit=100)
    with pytest.raises(InvalidArgument, match="processors"):
        copy_logs_to_redis(tmp_path, "c", processors=0, limit=1000)
    with pytest.raises(InvalidArgument, match="limit"):
        copy_logs_to_redis(tmp_path, "c", processors=1, limit=-5)
    with pytest.raises(InvalidArgument):
        copy_logs_to_redis(tmp_path, "a:{b}", processors=1, limit=1000)
    assert redis_client.dbsize() == 0


def test_channel_in_use_is_refused_and_left_alone(tmp_path, redis_client):
    from redisparts_app.services.chat import create_chat

    create_chat("ann", ["bob"], "our chat", chat_id="taken")
    keys = sorted(scan_keys(redis_client, "*"))
    with pytest.raises(ChatExists):
        copy_logs_to_redis(tmp_path, "taken", processors=1, limit=1000)
    assert sorted(scan_keys(redis_client, "*")) == keys


def test_interrupted_upload_deletes_the_channel(tmp_path, redis_client):
    write(tmp_path, "a.log", b"z" * 100)

    def interrupt(_: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_logs_to_redis(tmp_path, "c", processors=2, limit=1000, progress=interrupt)
    assert redis_client.dbsize() == 0


def test_a_channel_is_listed_until_it_is_deleted(tmp_path, redis_client, face):
    svc = face(files)
    copy_logs_to_redis(tmp_path, "stuck", processors=2, limit=100)  # nothing to wait for
    done_key, chunk_keys = file_keys("stuck", 1, 2)  # what an uploader that died left
    for key in (done_key, *chunk_keys):
        redis_client.set(key, b"x", ex=60)
    assert svc.channels() == ["stuck"]
    with pytest.raises(InvalidArgument, match="channel"):
        svc.delete_channel("stuck:{1}")
    assert svc.delete_channel("stuck") == 3
    assert svc.channels() == []
    assert registry.names("files") == registry.names("chat") == []
    assert redis_client.dbsize() == 0
    assert svc.delete_channel("stuck") == 0  # nothing left: nothing to do


def test_processor_waits_for_its_channel_then_gives_up(redis_client):
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(DistributionTimeout, match="did not appear within 5"):
        process_logs_from_redis(
            "never", "0", print, wait_timeout=5, clock=lambda: now[0], sleep=sleep
        )
    assert now[0] > 5


def test_processor_outside_the_channel_is_refused(tmp_path):
    from redisparts_app.services.chat import create_chat

    create_chat("source", ["0", "1"], ":start", chat_id="pair")
    with pytest.raises(NotChatMember):
        process_logs_from_redis("pair", "7", print, **FAST)


def test_truncated_or_trailing_garbage_gzip_is_corrupt():
    data = gzip.compress(b"hello\n" * 100)
    with pytest.raises(CorruptFile, match="truncated"):
        b"".join(gunzip([data[:-10]], "cut.gz"))
    with pytest.raises(CorruptFile, match="bad gzip data"):
        b"".join(gunzip([data + b"junk"], "junk.gz"))


def test_gunzip_bounds_each_output_piece():
    data = gzip.compress(b"\0" * (5 << 20))  # 5 MiB from a few KiB
    pieces = list(gunzip([data], "zeros.gz"))
    assert b"".join(pieces) == b"\0" * (5 << 20)
    assert max(len(p) for p in pieces) <= 1 << 20


@given(st.binary(max_size=300), st.lists(st.integers(1, 40), max_size=30))
def test_split_lines_rebuilds_the_stream_whatever_the_blocks(data, cuts):
    blocks, rest = [], io.BytesIO(data)
    for size in cuts:
        blocks.append(rest.read(size))
    blocks.append(rest.read())
    pieces = data.split(b"\n")
    expected = [piece + b"\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    assert list(split_lines(blocks)) == expected


def test_commands_copy_and_process(tmp_path, redis_client):
    write(tmp_path, "a.log", b"1.1.1.1 2026-11-20 x\n" * 3)
    write(tmp_path, "b.log.gz", gzip.compress(b"line\n" * 5))
    out, err = io.StringIO(), io.StringIO()
    failures = []

    def copy():
        try:
            call_command(
                "rp_copy_logs", str(tmp_path), channel="cmd", processors=1, limit=10_000,
                stdout=out, stderr=err,
            )  # fmt: skip
        except BaseException as exc:
            failures.append(exc)

    uploader = threading.Thread(target=copy)
    uploader.start()
    processed = io.StringIO()
    call_command(
        "rp_process_logs", channel="cmd", processor_id="0", aggregate="lines", timeout=30,
        stdout=processed, stderr=io.StringIO(),
    )  # fmt: skip
    uploader.join(30)
    assert not failures
    assert "a.log: 3 lines" in processed.getvalue()
    assert "b.log.gz: 5 lines" in processed.getvalue()
    assert "Processed 2 file(s), 8 lines" in processed.getvalue()
    assert "Distributed 2 file(s)" in out.getvalue()
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize(
    ("command", "options", "message"),
    [
        ("rp_copy_logs", {"processors": 0}, "must be >= 1"),
        ("rp_copy_logs", {"limit": 3}, "more than the limit of 3 bytes"),
        ("rp_copy_logs", {"channel": "a*b"}, "invalid channel"),
        ("rp_copy_logs", {"folder": "/nonexistent/folder"}, "is not a folder"),
        ("rp_process_logs", {"block_size": 0}, "--block-size must be >= 1"),
        ("rp_process_logs", {"processor_id": "x:y"}, "invalid processor id"),
        ("rp_process_logs", {"timeout": 0.05}, "did not appear within"),
    ],
)
def test_commands_report_bad_input(tmp_path, redis_client, command, options, message):
    write(tmp_path, "a.log", b"four")
    options = dict(options)  # the parameter is shared by the server and cluster runs
    args = [options.pop("folder", str(tmp_path))] if command == "rp_copy_logs" else []
    defaults = {"channel": "c", "limit": 1000} if command == "rp_copy_logs" else {}
    if command == "rp_process_logs":
        defaults = {"channel": "c", "processor_id": "0", "timeout": 0.05}
    with pytest.raises(CommandError, match=message):
        call_command(command, *args, **{**defaults, **options}, stderr=io.StringIO())
    assert redis_client.dbsize() == 0
