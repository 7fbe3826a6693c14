import signal
import threading
import time
from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.management.base import RedisCommand
from redisparts_app.management.progress import progress_bar
from redisparts_app.services.counters import (
    CleanReport,
    clean_counters,
    index_size,
    precisions,
    sample_count,
)


class Command(RedisCommand):
    help = (
        "Trim every counter to REDISPARTS['COUNTER_SAMPLES'] samples per precision and "
        "forget empty counters, once (--once) or every --interval seconds until stopped."
    )
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--interval",
            type=float,
            default=60.0,
            help="seconds between the starts of two passes (default 60)",
        )
        parser.add_argument("--once", action="store_true", help="run one pass and exit")

    def handle(
        self,
        *args: Any,
        interval: float,
        once: bool,
        verbosity: int,
        as_json: bool,
        **options: Any,
    ) -> None:
        if not interval > 0:
            raise CommandError(
                f"--interval must be a positive number of seconds, got {interval}", returncode=2
            )
        precisions()  # a bad setting stops the command before any pass
        sample_count()
        client = self.connect()

        stop = threading.Event()
        # Signal handlers can only be set from the main thread.
        in_main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set()) if in_main else None
        # With --json: the totals of every pass, once stopped.
        totals = {"passes": 0, "checked": 0, "trimmed": 0, "forgotten": 0}
        try:
            pass_number = 0
            while True:
                started = time.monotonic()
                report = self._pass(client, pass_number, interval, verbosity)
                totals["passes"] += 1
                for name in ("checked", "trimmed", "forgotten"):
                    totals[name] += getattr(report, name)
                if verbosity >= 1 and not as_json:
                    self.stdout.write(
                        f"Pass {pass_number}: checked {report.checked}, trimmed "
                        f"{report.trimmed} samples, forgot {report.forgotten} counters."
                    )
                pass_number += 1
                if once or stop.wait(max(0.0, interval - (time.monotonic() - started))):
                    break
        except KeyboardInterrupt:  # a stop request like SIGTERM, not a failure
            if not as_json:
                self.stdout.write("Interrupted; stopping.")
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, previous)
        self.report(totals, as_json=as_json)

    def _pass(self, client: Any, pass_number: int, interval: float, verbosity: int) -> CleanReport:
        with progress_bar(
            stream=self.stderr,
            total=index_size(client=client),
            desc=f"pass {pass_number}",
            unit="counter",
            disable=None if verbosity >= 1 else True,  # None: only on a terminal
            leave=False,
        ) as bar:
            return clean_counters(
                client=client, pass_number=pass_number, interval=interval, progress=bar.update
            )
