from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.exceptions import shorten
from redisparts_app.management.base import RedisCommand
from redisparts_app.management.progress import progress_bar
from redisparts_app.services import files


class Command(RedisCommand):
    help = (
        "Copy every file of a folder (plain or gzip) into Redis and distribute it to "
        "N processors through a channel, holding at most --limit bytes at once."
    )
    interrupted = "interrupted; the channel's files and chat were deleted"
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", help="folder whose files are distributed, by name order")
        parser.add_argument("--channel", required=True, help="channel (chat) name, unused so far")
        parser.add_argument(
            "--processors", type=int, default=1, help="number of processors (ids 0 … N-1)"
        )
        parser.add_argument(
            "--limit",
            type=int,
            default=1 << 30,
            help="most bytes of files held in Redis at once (default 1 GiB)",
        )
        parser.add_argument(
            "--chunk-size", type=int, help="bytes per chunk key (default FILES_CHUNK_SIZE)"
        )
        parser.add_argument(
            "--timeout",
            type=float,
            help="give up when no processor finishes a file for this many seconds",
        )

    def handle(
        self,
        *args: Any,
        folder: Any,
        channel: Any,
        processors: Any,
        limit: Any,
        chunk_size: Any,
        timeout: Any,
        as_json: Any,
        **options: Any,
    ) -> None:
        if processors < 1 or limit < 1 or (chunk_size is not None and chunk_size < 1):
            raise CommandError("--processors, --limit and --chunk-size must be >= 1", returncode=2)
        if timeout is not None and timeout <= 0:
            raise CommandError("--timeout must be positive", returncode=2)
        path, shown = Path(folder), shorten(folder, 200)
        try:
            is_folder = path.is_dir()
        except OSError as exc:  # a name too long, a folder we may not look into...
            raise CommandError(f"cannot use {shown}: {exc.strerror}", returncode=2) from exc
        if not is_folder:
            raise CommandError(f"{shown} is not a folder", returncode=2)
        client = self.connect()
        total = sum(p.stat().st_size for p in path.iterdir() if p.is_file())
        bar = progress_bar(
            total=total,
            unit="B",
            unit_scale=True,
            desc=f"copy to {channel}",
            stream=self.stderr,
            disable=options["verbosity"] < 1,
        )
        try:
            report = files.copy_logs_to_redis(
                path,
                channel,
                processors=processors,
                limit=limit,
                client=client,
                chunk_size=chunk_size,
                wait_timeout=timeout,
                progress=bar.update,
            )
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        except OSError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            bar.close()
        self.report(
            report,
            as_json=as_json,
            text=f"Distributed {report.files} file(s), {report.bytes} bytes, on channel "
            f"{channel!r} to {processors} processor(s); at most {report.most_held} bytes "
            "held in Redis.",
        )
