"""File distribution: MB/s copied into Redis and processed back, plain and gzip.

Four generated log files (about 4 MB each, lines ``<IPv4> <day> GET /path ...``),
and the same files gzipped. In each repetition, for each kind:

- copied: ``copy_logs_to_redis`` (read, SHA-256, SET of 1 MB chunks) in a child
  process, timed until its last chunk is written; beside it a plain loop reading
  the same files and SETting the same chunks;
- processed: ``process_logs_from_redis`` in this process with a callback that
  counts lines (GETRANGE in 128 KB blocks, SHA-256, gunzip, line splitting);
  beside it a plain GETRANGE read of the same bytes in the same blocks.

MB/s count the bytes held in Redis (the compressed bytes for gzip files).

    .venv/bin/python -m bench.files [--quick]
"""

import gzip
import multiprocessing
import random
import statistics
import tempfile
import time
from pathlib import Path

import redis

from bench.harness import Ratio, Section, alternate, main

MB = 1 << 20
FILES = 4


def write_logs(folder: Path, megabytes_per_file: float, seed: int = 5) -> None:
    rng = random.Random(seed)
    paths = ["/", "/market", "/chat", "/guild/mail", "/static/app.css", "/login"]
    for number in range(FILES):
        lines, size = [], 0
        while size < megabytes_per_file * MB:
            ip = ".".join(str(rng.randint(1, 254)) for _ in range(4))
            line = (
                f"{ip} 2026-11-{rng.randint(1, 28):02d} GET {rng.choice(paths)}"
                f" {rng.choice((200, 200, 200, 304, 404))} {rng.randint(100, 90000)}\n"
            )
            lines.append(line)
            size += len(line)
        data = "".join(lines).encode()
        (folder / "plain").mkdir(exist_ok=True)
        (folder / "gzip").mkdir(exist_ok=True)
        (folder / "plain" / f"access-{number}.log").write_bytes(data)
        (folder / "gzip" / f"access-{number}.log.gz").write_bytes(gzip.compress(data, 6))


def copy_child(url: str, folder: Path, channel: str, total: int, report) -> None:
    from redisparts_app.services.files import copy_logs_to_redis

    written = [0]
    start = time.perf_counter()

    def progress(count: int) -> None:
        written[0] += count
        if written[0] == total:
            report.send(time.perf_counter() - start)

    copy_logs_to_redis(
        folder,
        channel,
        processors=1,
        limit=total + MB,
        client=redis.Redis.from_url(url),
        progress=progress,
        poll_interval=0.01,
        wait_timeout=120,
    )


class Distribution:
    """Runs ours and the plain loops on one folder; keeps the line count as a check."""

    def __init__(self, url: str, folder: Path) -> None:
        from redisparts_app.conf import app_settings

        self.url, self.folder = url, folder
        self.client = redis.Redis.from_url(url)
        self.files = sorted(folder.iterdir())
        self.total = sum(path.stat().st_size for path in self.files)
        self.chunk, self.block = app_settings.FILES_CHUNK_SIZE, app_settings.FILES_BLOCK_SIZE
        self.runs = 0
        self.lines = 0

    def ours(self) -> dict[str, float]:
        """MB/s of our copy (in a child process), then of our processing."""
        from redisparts_app.services.files import process_logs_from_redis

        self.runs += 1
        channel = f"bench-{self.folder.name}-{self.runs}"
        receive, send = multiprocessing.Pipe(duplex=False)
        child = multiprocessing.get_context("fork").Process(
            target=copy_child, args=(self.url, self.folder, channel, self.total, send)
        )
        child.start()
        if not receive.poll(120):
            raise RuntimeError("the copy did not finish within 120 s")
        copied = receive.recv()
        lines = [0]

        def count(_line: bytes) -> None:
            lines[0] += 1

        start = time.perf_counter()
        process_logs_from_redis(
            channel, "0", count, client=self.client, poll_interval=0.01, wait_timeout=60
        )
        processed = time.perf_counter() - start
        child.join(60)
        self.lines = lines[0]
        return {"copy": self.total / MB / copied, "process": self.total / MB / processed}

    def plain(self) -> dict[str, float]:
        """MB/s of a plain loop SETting the same chunks, then GETRANGEing them back."""
        start = time.perf_counter()
        keys = []
        for number, path in enumerate(self.files):
            with path.open("rb") as source:
                while chunk := source.read(self.chunk):
                    keys.append(f"bench:plain:{number}:{len(keys)}")
                    self.client.set(keys[-1], chunk)
        written = time.perf_counter() - start
        start = time.perf_counter()
        for key in keys:
            length = self.client.strlen(key)
            for first in range(0, length, self.block):
                self.client.getrange(key, first, first + self.block - 1)
        read = time.perf_counter() - start
        self.client.delete(*keys)
        return {"SET": self.total / MB / written, "GETRANGE": self.total / MB / read}


def run(ctx) -> list[Section]:
    # A pass takes well under a second: more rounds than the default steady the medians.
    rounds = ctx.repetitions if ctx.quick else max(ctx.repetitions, 5)
    rows, ratios = [], []
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        write_logs(folder, 1.0 if ctx.quick else 4.0)
        text = sum(path.stat().st_size for path in (folder / "plain").iterdir()) / MB
        for kind in ("plain", "gzip"):
            ours = Distribution(ctx.url("tcp"), folder / kind)
            samples = alternate({"ours": ours.ours, "plain": ours.plain}, rounds)
            stored = ours.total / MB
            process_vs_read = statistics.median(
                r["ours"]["process"] / r["plain"]["GETRANGE"] for r in samples.rounds
            )
            copy_vs_set = statistics.median(
                r["ours"]["copy"] / r["plain"]["SET"] for r in samples.rounds
            )
            rows.append(
                [
                    kind,
                    stored,
                    ours.lines,
                    samples.median("ours", "copy"),
                    samples.median("plain", "SET"),
                    samples.median("ours", "process"),
                    samples.median("plain", "GETRANGE"),
                    samples.median("ours", "process") * text / stored,
                ]
            )
            ratios += [
                Ratio(f"copy / plain SET ({kind})", copy_vs_set),
                Ratio(f"process / plain GETRANGE ({kind})", process_vs_read),
            ]
    return [
        Section(
            title="File distribution: MB/s copied and processed, one processor",
            columns=[
                "files",
                "MB in Redis",
                "lines",
                "copy",
                "plain SET",
                "process",
                "plain GETRANGE",
                "process, MB of text/s",
            ],
            rows=rows,
            ratios=ratios,
            notes=[
                f"{FILES} files, {text:.1f} MB of log text; MB/s count the bytes held in Redis"
                " (the compressed bytes for gzip); the last column counts the text processed",
                "copy: read, SHA-256, SET of 1 MB chunks, the announcements; process: GETRANGE"
                " of 128 KB blocks, SHA-256, gunzip and a callback for every line",
                f"medians of {rounds} alternating rounds; ratios are medians of per-round ratios",
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__.splitlines()[0])
