import dataclasses
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils.module_loading import import_string

from redisparts_app.management.base import RedisCommand
from redisparts_app.management.progress import progress_bar
from redisparts_app.services import files


class Command(RedisCommand):
    help = (
        "Process the files distributed on a channel as one of its processors: count their "
        "lines, or feed them to an aggregator class."
    )
    interrupted = "interrupted; the file in progress was not reported finished"
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--channel", required=True, help="channel (chat) name")
        parser.add_argument(
            "--id", required=True, dest="processor_id", help="this processor's id (0 … N-1)"
        )
        parser.add_argument(
            "--aggregate",
            default="lines",
            metavar="lines|DOTTED.PATH",
            help="count lines per file (default), or the dotted path of an aggregator class: "
            "built with client=, called with each line (bytes), .flush(name) after each file, "
            "e.g. marketplace.visits.CountryVisits",
        )
        parser.add_argument(
            "--block-size", type=int, help="bytes per GETRANGE (default FILES_BLOCK_SIZE)"
        )
        parser.add_argument(
            "--timeout", type=float, help="give up when the channel does not appear in time"
        )

    def handle(
        self,
        *args: Any,
        channel: Any,
        processor_id: Any,
        aggregate: Any,
        block_size: Any,
        timeout: Any,
        as_json: Any,
        **options: Any,
    ) -> None:
        if block_size is not None and block_size < 1:
            raise CommandError("--block-size must be >= 1", returncode=2)
        if timeout is not None and timeout <= 0:
            raise CommandError("--timeout must be positive", returncode=2)
        client = self.connect()
        visits = None
        if aggregate != "lines":
            try:
                visits = import_string(aggregate)(client=client)
            except ImportError as exc:
                raise CommandError(f"--aggregate: {exc}", returncode=2) from exc
        lines_of_file = [0]

        def callback(line: bytes) -> None:
            lines_of_file[0] += 1
            if visits is not None:
                visits(line)

        def flush(name: str) -> None:
            if visits is not None:
                visits.flush(name)
            if not as_json:
                self.stdout.write(f"{name}: {lines_of_file[0]} lines")
            lines_of_file[0] = 0

        bar = progress_bar(
            unit="B",
            unit_scale=True,
            desc=f"process {channel}",
            stream=self.stderr,
            disable=options["verbosity"] < 1,
        )

        try:
            report = files.process_logs_from_redis(
                channel,
                processor_id,
                callback,
                flush,
                client=client,
                block_size=block_size,
                wait_timeout=timeout,
                progress=bar.update,
            )
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        finally:
            bar.close()
        message = f"Processed {report.files} file(s), {report.lines} lines, {report.bytes} bytes."
        skipped = getattr(visits, "skipped", 0)
        if skipped:
            message += f" {skipped} line(s) were not '<ip> <YYYY-MM-DD> ...' and skipped."
        self.report(
            {**dataclasses.asdict(report), "skipped": skipped}, as_json=as_json, text=message
        )
