"""Resumable log processing: feed a log file's lines to a callback, exactly once across crashes.

Import: ``from redisparts_app.services.log_processing import LogProcessor``.

``LogProcessor`` feeds the lines of a log file (or of a directory of files whose names
sort in write order) to a callback that queues its Redis effects on a MULTI pipeline.
Each batch of lines commits in one MULTI/EXEC together with the new progress, so after a
crash the processor resumes exactly after the last committed line: no line's effects are
recorded twice or lost. Progress lives in ``rp:logproc:{<name>}:progress`` (hash: file,
device, inode, head_size, head_sha256, offset in bytes). A file is recognised by
identity, not only by name: device and inode, a size not below the offset, and the
SHA-256 of its first bytes (up to 1 KiB of the processed part). A file replaced under
the same name or truncated starts again from byte 0 (the result says so). Only newline-
terminated lines are processed unless the file is known complete (``final=True``): a
writer may still be appending the tail. Two processors of one name cannot both commit:
each batch WATCHes the progress record and a changed record raises
``LogProgressConflict``. On a Redis Cluster the callback's keys must carry the hash tag
``{<name>}`` (``LogProcessor.key``).
"""

import hashlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import redis
from redis.client import Pipeline

from .. import keys
from ..connection import Client, on_slot, resolve_client
from ..exceptions import LogProgressConflict
from ..validation import check_count

__all__ = [
    "LogProcessor",
    "ProcessResult",
]

logger = logging.getLogger(__name__)

COMPONENT = "logproc"
HEAD_SIZE = 1024
MAX_BATCH_SIZE = 100_000

LineCallback = Callable[[Pipeline, bytes], None]


@dataclass
class ProcessResult:
    """What one ``process_file``/``process_directory`` call did."""

    files: int = 0
    lines: int = 0
    bytes: int = 0
    # "<file>: replaced" / "<file>: truncated" for files restarted from byte 0.
    restarted: list[str] = field(default_factory=list)


def _head_digest(fd: int, size: int) -> str:
    return hashlib.sha256(os.pread(fd, size, 0)).hexdigest()


class LogProcessor:
    """Feed log lines to ``callback(pipe, line)`` with exactly-once recorded effects.

    ``callback`` receives the MULTI pipeline and one line (bytes, with its
    newline); it must only queue commands on the pipeline (their replies are
    not available) and must not raise for a line it wants skipped.
    ``batch_size`` lines commit per MULTI/EXEC.
    """

    def __init__(
        self,
        name: str,
        callback: LineCallback,
        *,
        batch_size: int = 1000,
        client: Client | None = None,
    ) -> None:
        self.name = keys.validate_key_part(name, "log processor")
        check_count(batch_size, "batch_size", maximum=MAX_BATCH_SIZE)
        self.callback = callback
        self.batch_size = batch_size
        self.client = resolve_client(client)
        self.progress_key = self.key("progress")
        self._expected: dict[bytes, bytes] | None = None

    def key(self, *roles: str) -> str:
        """Return a key in this processor's slot, for the callback's effects on a Cluster."""
        return keys.make_key(COMPONENT, self.name, *roles)

    def progress(self) -> dict[str, Any]:
        """Return the recorded progress (empty when nothing was committed yet)."""
        raw = self.client.hgetall(self.progress_key)
        return {k.decode(): v.decode() for k, v in raw.items()}

    def reset(self) -> None:
        """Forget the progress: the next run starts from the first byte."""
        self.client.delete(self.progress_key)

    def process_file(self, path: str | os.PathLike, *, final: bool = False) -> ProcessResult:
        """Process ``path`` from its recorded offset (or byte 0 for a new file)."""
        result = ProcessResult()
        self._expected = self.client.hgetall(self.progress_key)
        self._process_one(Path(path), final=final, result=result)
        return result

    def process_directory(
        self, directory: str | os.PathLike, *, final: bool = False
    ) -> ProcessResult:
        """Process the regular files of ``directory`` in name order, resuming at the recorded one.

        Names must sort in the order the files were written (e.g. dated names);
        files before the recorded one are skipped. Every file but the last is
        complete; the last keeps an unterminated tail for later unless ``final``.
        """
        directory = Path(directory)
        names = sorted(p.name for p in directory.iterdir() if p.is_file())
        result = ProcessResult()
        self._expected = self.client.hgetall(self.progress_key)
        current = self._expected.get(b"file", b"").decode()
        for index, name in enumerate(names):
            if current and name < current:
                continue
            last = index == len(names) - 1
            self._process_one(directory / name, final=final or not last, result=result)
        return result

    def _process_one(self, path: Path, *, final: bool, result: ProcessResult) -> None:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            offset = self._resume_offset(path, handle.fileno(), info, result)
            handle.seek(offset)
            result.files += 1
            for batch, end in self._batches(handle, offset, final):
                self._commit(path, handle.fileno(), info, batch, end)
                result.lines += len(batch)
                result.bytes += end - offset
                offset = end

    def _resume_offset(
        self, path: Path, fd: int, info: os.stat_result, result: ProcessResult
    ) -> int:
        recorded = {k.decode(): v.decode() for k, v in (self._expected or {}).items()}
        if recorded.get("file") != path.name:
            return 0
        offset = int(recorded["offset"])
        same_inode = (int(recorded["device"]), int(recorded["inode"])) == (
            info.st_dev,
            info.st_ino,
        )
        head_size = int(recorded["head_size"])
        if not same_inode:
            result.restarted.append(f"{path.name}: replaced")
            return 0
        if info.st_size < offset or _head_digest(fd, head_size) != recorded["head_sha256"]:
            result.restarted.append(f"{path.name}: truncated")
            return 0
        return offset

    def _batches(
        self, handle: BinaryIO, offset: int, final: bool
    ) -> Iterator[tuple[list[bytes], int]]:
        batch: list[bytes] = []
        position = offset
        for line in handle:
            if not line.endswith(b"\n") and not final:
                break  # a writer may still be completing this line
            batch.append(line)
            position += len(line)
            if len(batch) >= self.batch_size:
                yield batch, position
                batch = []
        if batch:
            yield batch, position

    def _commit(
        self, path: Path, fd: int, info: os.stat_result, lines: list[bytes], end: int
    ) -> None:
        head_size = min(HEAD_SIZE, end)
        progress = {
            b"file": path.name.encode(),
            b"device": str(info.st_dev).encode(),
            b"inode": str(info.st_ino).encode(),
            b"head_size": str(head_size).encode(),
            b"head_sha256": _head_digest(fd, head_size).encode(),
            b"offset": str(end).encode(),
        }
        with (
            on_slot(self.client, self.progress_key) as server,
            server.pipeline(transaction=True) as pipe,
        ):
            try:
                pipe.watch(self.progress_key)
                if pipe.hgetall(self.progress_key) != self._expected:
                    raise LogProgressConflict(
                        f"the progress of log processor {self.name!r} changed under it; "
                        "is another processor of that name running?"
                    )
                pipe.multi()
                for line in lines:
                    self.callback(pipe, line)
                pipe.hset(self.progress_key, mapping=progress)
                pipe.execute()
            except redis.WatchError as exc:
                raise LogProgressConflict(
                    f"the progress of log processor {self.name!r} changed during a batch"
                ) from exc
        self._expected = progress
