from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.exceptions import RedisPartsError
from redisparts_app.management.base import (
    RedisCommand,
    add_import_argument,
    import_task_modules,
)
from redisparts_app.services.tasks import Scheduler

from .rp_worker import _log_to_stderr


class Command(RedisCommand):
    help = (
        "Move due delayed tasks and retries to their queues, fire the periodic schedules "
        "and requeue tasks whose worker died, until SIGTERM or Ctrl-C; several schedulers "
        "may run at once."
    )
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--group", help="queue group (default: REDISPARTS['QUEUE_GROUP'])")
        parser.add_argument(
            "--max-wait",
            type=float,
            default=1.0,
            help="longest sleep between passes, in seconds (default 1); it also bounds how "
            "long a stop request waits",
        )
        parser.add_argument("--once", action="store_true", help="run one pass and exit")
        parser.add_argument(
            "--no-reap", dest="reap", action="store_false", help="do not requeue expired leases"
        )
        add_import_argument(parser, "tasks and schedules")

    def handle(
        self,
        *args: Any,
        group: Any,
        max_wait: Any,
        once: Any,
        reap: Any,
        modules: Any,
        verbosity: Any,
        as_json: bool,
        **options: Any,
    ) -> None:
        import_task_modules(modules)
        try:
            scheduler = Scheduler(group, max_wait=max_wait, reap=reap)
        except (RedisPartsError, ValueError) as exc:
            raise CommandError(str(exc), returncode=2) from exc
        _log_to_stderr(verbosity)
        moved = scheduler.run(burst=once)
        figures = {
            "moved": moved,
            "requeued": scheduler.requeued,
            "quarantined": scheduler.quarantined,
            "fired": scheduler.fired,
        }
        text = (
            f"Moved {moved} delayed task(s); requeued {scheduler.requeued}, "
            f"quarantined {scheduler.quarantined}; fired {scheduler.fired} schedule slot(s)."
        )
        self.report(figures, as_json=as_json, text=text if verbosity >= 1 else None)
