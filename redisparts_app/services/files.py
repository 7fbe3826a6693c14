"""File distribution through Redis: one uploader, N processors, bounded memory.

Import: ``from redisparts_app.services.files import copy_logs_to_redis, process_logs_from_redis``.

The uploader (``copy_logs_to_redis``) copies every file of a folder into chunk keys of at
most ``FILES_CHUNK_SIZE`` bytes with its SHA-256, and announces it in a group chat named
after the channel whose members are the processors ``"0"`` … ``"N-1"`` (``services.chat``).
A processor (``process_logs_from_redis``) reads each file in ``FILES_BLOCK_SIZE`` blocks
(gzip decompressed incrementally), calls ``callback(line: bytes)`` per line and
``flush(file_name)`` per file, then reports completion. Keys, one hash tag per file, so the
last processor's clean-up is one Lua script in one Cluster slot::

    rp:files:{<channel>#<n>}:chunk:<i>   the file's bytes, chunk i (TTL FILES_KEY_TTL)
    rp:files:{<channel>#<n>}:done        processors finished (TTL FILES_KEY_TTL)

plus the chat ``<channel>`` (``rp:chat:{<channel>}:...``). Guarantee: the bytes held in Redis
never exceed ``limit``; a SHA-256 mismatch or missing chunk raises CorruptFile before
``flush``; delivery to each processor is at most once. Times are seconds. Async twins:
``achannels``, ``adelete_channel``; the uploader and the processors stay sync.
"""

import functools
import hashlib
import itertools
import json
import os
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import faces, lua
from ..conf import app_settings
from ..connection import Client, resolve_async_client, resolve_client
from ..exceptions import (
    ChatNotFound,
    CorruptFile,
    DistributionTimeout,
    FileDistributionError,
    FileTooLarge,
)
from ..keys import ascan_keys, component_pattern, make_key, scan_keys, validate_key_part
from ..validation import check_count
from . import chat, registry
from .chat import (
    chat_keys,
    create_chat,
    fetch_chat_messages,
    leave_chat,
    send_message,
)

__all__ = [
    "FileInfo",
    "ProcessReport",
    "UploadReport",
    "achannels",
    "adelete_channel",
    "channels",
    "copy_logs_to_redis",
    "decompress",
    "delete_channel",
    "file_keys",
    "gunzip",
    "process_logs_from_redis",
    "split_lines",
]

COMPONENT = "files"
SOURCE = "source"
START, DONE = ":start", ":done"
MAX_PROCESSORS = 1000
GZIP_MAGIC = b"\x1f\x8b"
# Decompressed bytes per zlib call, so a small block of a highly compressed file
# never expands into one huge string.
MAX_INFLATE = 1 << 20

Progress = Callable[[int], object]


@dataclass(frozen=True)
class FileInfo:
    """What the uploader announces about one file (the chat message, as JSON)."""

    number: int
    name: str
    size: int
    chunk_size: int
    sha256: str
    processors: int

    @property
    def chunks(self) -> int:
        return -(-self.size // self.chunk_size)

    def encode(self) -> str:
        # ASCII escapes keep file names that are not UTF-8 (surrogates) representable.
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> "FileInfo":
        return cls(**json.loads(text))


@dataclass
class UploadReport:
    files: int = 0
    bytes: int = 0
    # The most bytes of chunks the uploader held in Redis at once.
    most_held: int = 0


@dataclass
class ProcessReport:
    files: int = 0
    lines: int = 0
    # Bytes read from Redis (compressed bytes for gzip files).
    bytes: int = 0


def _processor_ids(count: int) -> list[str]:
    """Return the chat member names of ``count`` processors: "0" … "count-1"."""
    return [str(n) for n in range(count)]


def file_keys(channel: str, number: int, chunks: int) -> tuple[str, list[str]]:
    """Return the done-counter key and the chunk keys of file ``number`` of a channel."""
    tag = f"{channel}#{number}"
    chunk_keys = [make_key(COMPONENT, tag, "chunk", str(i)) for i in range(chunks)]
    return make_key(COMPONENT, tag, "done"), chunk_keys


def copy_logs_to_redis(
    folder: str | os.PathLike,
    channel: str,
    *,
    processors: int,
    limit: int,
    client: Client | None = None,
    chunk_size: int | None = None,
    poll_interval: float = 0.1,
    wait_timeout: float | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> UploadReport:
    """Distribute the files of ``folder`` (sorted by name) to ``processors`` processors.

    Hold at most ``limit`` bytes of files in Redis; ``progress(n)`` is called
    with the bytes of each chunk written. Raise DistributionTimeout when no
    file is finished for ``wait_timeout`` seconds while waiting. Bad arguments,
    a missing folder or a file larger than ``limit`` raise before anything is
    written; a channel in use raises ChatExists. A failure or an interruption
    (KeyboardInterrupt) after that deletes the channel's files and chat.
    """
    client = resolve_client(client)
    channel = validate_key_part(channel, "channel")
    processors = check_count(processors, "processors", maximum=MAX_PROCESSORS)
    limit = check_count(limit, "limit")
    chunk_size = check_count(chunk_size or app_settings.FILES_CHUNK_SIZE, "chunk size")
    files = _list_files(Path(folder), limit)
    create_chat(SOURCE, _processor_ids(processors), START, chat_id=channel, client=client)
    registry.note(COMPONENT, channel, client=client)
    report = UploadReport()
    held: deque[tuple[str, int]] = deque()  # (done key, bytes) of files still in Redis

    def wait_until(fits: Callable[[], bool]) -> None:
        since = clock()
        while not fits():
            if _forget_finished(client, held):
                since = clock()
                continue
            if wait_timeout is not None and clock() - since > wait_timeout:
                raise DistributionTimeout(
                    f"channel {channel!r}: no processor finished a file for {wait_timeout}s "
                    f"({len(held)} file(s) still held in Redis)"
                )
            sleep(poll_interval)

    try:
        for number, (path, size) in enumerate(files, start=1):
            wait_until(functools.partial(_fits, held, size, limit))
            info = _upload(client, channel, number, path, size, chunk_size, processors, progress)
            done_key, _ = file_keys(channel, number, 0)
            held.append((done_key, info.size))
            report.most_held = max(report.most_held, sum(s for _, s in held))
            report.files += 1
            report.bytes += info.size
            send_message(channel, SOURCE, info.encode(), client=client)
        send_message(channel, SOURCE, DONE, client=client)
        wait_until(lambda: not held)
    except BaseException:
        # Interrupted (Ctrl-C) or failed: leave nothing behind; processors see the
        # channel vanish and stop with an error.
        delete_channel(channel, client=client)
        raise
    _leave(channel, SOURCE, client)
    return report


def process_logs_from_redis(
    channel: str,
    processor_id: str,
    callback: Callable[[bytes], object],
    flush: Callable[[str], object] | None = None,
    *,
    client: Client | None = None,
    block_size: int | None = None,
    poll_interval: float = 0.1,
    wait_timeout: float | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> ProcessReport:
    """Process every file announced on ``channel`` until its ``":done"``; return counts.

    Wait for the channel to appear for at most ``wait_timeout`` seconds (for
    ever without one). ``progress(n)`` is called with the bytes of each block
    read. Raise NotChatMember for an id that is not one of the channel's
    processors and CorruptFile for a file whose bytes do not check out.
    """
    client = resolve_client(client)
    channel = validate_key_part(channel, "channel")
    processor_id = validate_key_part(processor_id, "processor id")
    block_size = check_count(block_size or app_settings.FILES_BLOCK_SIZE, "block size")
    report = ProcessReport()
    started = clock()
    joined = False
    while True:
        try:
            messages = fetch_chat_messages(channel, processor_id, client=client)
        except ChatNotFound:
            if joined:
                raise FileDistributionError(
                    f"channel {channel!r} was deleted before its end (upload aborted?)"
                ) from None
            if wait_timeout is not None and clock() - started > wait_timeout:
                raise DistributionTimeout(
                    f"channel {channel!r} did not appear within {wait_timeout}s"
                ) from None
            sleep(poll_interval)
            continue
        joined = True
        for message in messages:
            if message.sender != SOURCE or message.text == START:
                continue
            if message.text == DONE:
                _leave(channel, processor_id, client)
                return report
            info = FileInfo.decode(message.text)
            done_key, chunk_keys = file_keys(channel, info.number, info.chunks)
            blocks = _read_blocks(client, info, chunk_keys, block_size)
            for line in split_lines(decompress(_counted(blocks, report, progress), info.name)):
                callback(line)
                report.lines += 1
            if flush is not None:
                flush(info.name)
            lua.script(client, "files_done")(keys=[done_key, *chunk_keys], args=[info.processors])
            report.files += 1
        if not messages:
            sleep(poll_interval)


def _read_blocks(
    client: Client, info: FileInfo, chunk_keys: list[str], block_size: int
) -> Iterator[bytes]:
    """Yield a stored file's bytes in blocks of at most ``block_size`` (GETRANGE).

    After the last block, raise CorruptFile if a chunk is missing or short or
    the SHA-256 differs from the announced one.
    """
    digest = hashlib.sha256()
    for index, key in enumerate(chunk_keys):
        length = min(info.chunk_size, info.size - index * info.chunk_size)
        for start in range(0, length, block_size):
            end = min(start + block_size, length)
            block = client.getrange(key, start, end - 1)
            if len(block) != end - start:
                raise CorruptFile(
                    info.name,
                    f"chunk {index} holds {start + len(block)} bytes where {length} were "
                    "written (deleted, expired or truncated)",
                )
            digest.update(block)
            yield block
    if digest.hexdigest() != info.sha256:
        raise CorruptFile(info.name, "SHA-256 mismatch: the bytes in Redis were altered")


def decompress(blocks: Iterable[bytes], name: str) -> Iterator[bytes]:
    """Yield the bytes of ``blocks``, gunzipped if they start with the gzip magic bytes."""
    blocks = iter(blocks)
    head = b""
    while len(head) < len(GZIP_MAGIC):
        block = next(blocks, None)
        if block is None:
            break
        head += block
    rest = itertools.chain([head], blocks)
    if head.startswith(GZIP_MAGIC):
        return gunzip(rest, name)
    return (block for block in rest if block)


def gunzip(blocks: Iterable[bytes], name: str) -> Iterator[bytes]:
    """Decompress gzip data incrementally; any number of members, any header fields.

    Zero bytes padding the end (as tape-blocked files have) are ignored; other
    trailing data, corrupt or truncated data raise CorruptFile.
    """
    decoder = None
    for block in blocks:
        data = block
        while True:
            if decoder is None:
                if not data.strip(b"\0"):
                    break  # nothing, or the zeros padding the end of a file
                decoder = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            try:
                out = decoder.decompress(data, MAX_INFLATE)
            except zlib.error as exc:
                raise CorruptFile(name, f"bad gzip data: {exc}") from None
            if out:
                yield out
            if decoder.eof:
                data, decoder = decoder.unused_data, None  # the next member, if any
                continue
            data = decoder.unconsumed_tail
            if not data and len(out) < MAX_INFLATE:
                break  # needs the next block
    if decoder is not None:
        raise CorruptFile(name, "gzip data ends in the middle of a member (truncated)")


def split_lines(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """Yield the lines of a stream of blocks, each with its ``b"\\n"``.

    A line may span any number of blocks; a last line without a newline is
    yielded as it is; only ``b"\\n"`` ends a line (``b"\\r"`` is data).
    """
    partial: list[bytes] = []
    for block in blocks:
        if b"\n" not in block:
            if block:
                partial.append(block)
            continue
        lines = block.split(b"\n")
        first = lines[0]
        if partial:
            partial.append(first)
            first = b"".join(partial)
            partial = []
        yield first + b"\n"
        for line in lines[1:-1]:
            yield line + b"\n"
        if lines[-1]:
            partial.append(lines[-1])
    if partial:
        yield b"".join(partial)


def channels(*, client: Client | None = None) -> list[str]:
    """Return the channels whose distribution is under way (their chat exists), sorted.

    The candidates are the files registry's names (``services.registry``), never a SCAN.
    """
    return registry.existing(COMPONENT, _members_key, client=client)


async def achannels(*, client: Client | None = None) -> list[str]:
    """The async twin of ``channels`` (``client``: a redis.asyncio client or None)."""
    return await registry.aexisting(COMPONENT, _members_key, client=client)


def _members_key(channel: str) -> str:
    return chat_keys(channel)["members"]


def delete_channel(channel: str, *, client: Client | None = None) -> int:
    """Delete a channel's files and chat (after an aborted upload); return keys deleted.

    The files' keys are found with SCAN: a maintenance step.
    """
    client = resolve_client(client)
    pattern = _files_pattern(channel)
    deleted = sum(client.delete(key) for key in scan_keys(client, pattern))
    faces.run(_closing(channel), client)
    return deleted


async def adelete_channel(channel: str, *, client: Client | None = None) -> int:
    """The async twin of ``delete_channel``."""
    client = resolve_async_client(client)
    pattern = _files_pattern(channel)
    deleted = 0
    async for key in ascan_keys(client, pattern):
        deleted += await client.delete(key)
    await faces.arun(_closing(channel), client)
    return deleted


def _files_pattern(channel: str) -> str:
    """The SCAN pattern of every file key of ``channel`` (validated here)."""
    channel = validate_key_part(channel, "channel")
    return f"{component_pattern(COMPONENT)[:-1]}{{{channel}#*"


def _closing(channel: str) -> faces.Steps[None]:
    """Make every member leave the channel's chat (the last one out deletes it) and
    forget the channel."""
    try:
        members = yield chat._chat_members(channel)
    except ChatNotFound:
        members = {}
    for member in members:
        try:
            yield from chat._leave_chat(channel, member)
        except ChatNotFound:
            break
    yield registry.forget_command(COMPONENT, channel)


def _leave(channel: str, member: str, client: Client) -> None:
    # The last one out deletes the chat: the distribution is over.
    if leave_chat(channel, member, client=client) == 0:
        registry.forget(COMPONENT, channel, client=client)


def _list_files(folder: Path, limit: int) -> list[tuple[Path, int]]:
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder")
    files = []
    for path in sorted(folder.iterdir()):
        if path.is_file():
            size = path.stat().st_size
            if size > limit:
                raise FileTooLarge(str(path), size, limit)
            files.append((path, size))
    return files


def _upload(
    client: Client,
    channel: str,
    number: int,
    path: Path,
    size: int,
    chunk_size: int,
    processors: int,
    progress: Callable[[int], object] | None,
) -> FileInfo:
    """Write one file's chunks and its done counter; return what to announce.

    Copy the ``size`` bytes the file had when listed, so a growing log cannot
    push the bytes held past the limit.
    """
    ttl = app_settings.FILES_KEY_TTL
    digest = hashlib.sha256()
    done_key, chunk_keys = file_keys(channel, number, -(-size // chunk_size))
    with path.open("rb") as source:
        for index, key in enumerate(chunk_keys):
            wanted = min(chunk_size, size - index * chunk_size)
            chunk = source.read(wanted)
            if len(chunk) != wanted:
                raise FileDistributionError(f"{path} shrank while it was being copied")
            digest.update(chunk)
            client.set(key, chunk, ex=ttl)
            if progress is not None:
                progress(len(chunk))
    client.set(done_key, 0, ex=ttl)
    return FileInfo(number, path.name, size, chunk_size, digest.hexdigest(), processors)


def _fits(held: deque[tuple[str, int]], size: int, limit: int) -> bool:
    return sum(held_size for _, held_size in held) + size <= limit


def _forget_finished(client: Client, held: deque[tuple[str, int]]) -> bool:
    """Drop from ``held`` the files whose keys the last processor deleted."""
    if not held:
        return False
    pipe = client.pipeline(transaction=False)
    for done_key, _ in held:
        pipe.exists(done_key)
    finished = [entry for entry, exists in zip(held, pipe.execute(), strict=True) if not exists]
    for entry in finished:
        held.remove(entry)
    return bool(finished)


def _counted(
    blocks: Iterable[bytes], report: ProcessReport, progress: Callable[[int], object] | None
) -> Iterator[bytes]:
    for block in blocks:
        report.bytes += len(block)
        if progress is not None:
            progress(len(block))
        yield block
