from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.connection import get_redis
from redisparts_app.exceptions import shorten
from redisparts_app.management.base import RedisCommand
from redisparts_app.management.progress import progress_bar
from redisparts_app.services.persistence import backup


class Command(RedisCommand):
    help = "Snapshot Redis with BGSAVE and copy dump.rdb, with its SHA-256, into a folder."
    requires_system_checks = ()
    interrupted = "interrupted; no backup written"
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("destination", help="folder for the copy (created if missing)")
        parser.add_argument(
            "--connection",
            default=None,
            help="REDISPARTS connection alias (default: REDISPARTS['DEFAULT_CONNECTION'])",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            help="seconds to wait for BGSAVE (default: REDISPARTS['BACKUP_TIMEOUT'])",
        )

    def handle(
        self,
        *args: Any,
        destination: Any,
        connection: Any,
        timeout: Any,
        verbosity: Any,
        as_json: Any,
        **options: Any,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise CommandError("--timeout must be a positive number of seconds", returncode=2)
        bar = progress_bar(
            total=100, unit="%", desc="BGSAVE", disable=verbosity < 1, stream=self.stderr
        )

        def show(percent: float) -> None:
            bar.update(max(0.0, percent - bar.n))

        try:
            result = backup(
                destination, client=get_redis(connection), timeout=timeout, progress=show
            )
        except (OSError, ValueError) as exc:  # unwritable, too long, a NUL, unencodable...
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            shown = shorten(repr(destination), 200)
            raise CommandError(f"cannot write a backup to {shown}: {reason}", returncode=2) from exc
        finally:
            bar.close()
        self.report(
            result,
            as_json=as_json,
            text=f"Saved {result.path} ({result.size} bytes, {result.saved_at:%c})\n"
            f"sha256 {result.sha256} in {result.checksum_path}",
        )
