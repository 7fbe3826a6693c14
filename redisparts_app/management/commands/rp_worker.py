import logging
from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.exceptions import RedisPartsError
from redisparts_app.management.base import RedisCommand, add_import_argument, import_task_modules
from redisparts_app.management.progress import progress_bar
from redisparts_app.services.tasks import Worker
from redisparts_app.services.tasks.worker import logger

# How a task ended, as Worker.on_finished names it.
OUTCOMES = ("done", "retry", "fail", "expired", "cancelled", "lost")


class Command(RedisCommand):
    help = (
        "Run queued tasks from the given queues, highest priority first, until SIGTERM or "
        "Ctrl-C (running tasks finish, unstarted ones go back; a second signal stops at "
        "once); waits and retries while Redis is unreachable."
    )
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "queues", nargs="*", default=["default"], help="queue names, highest priority first"
        )
        parser.add_argument("--group", help="queue group (default: REDISPARTS['QUEUE_GROUP'])")
        parser.add_argument("--burst", action="store_true", help="exit once every queue is empty")
        parser.add_argument("--max-tasks", type=int, help="exit after running this many tasks")
        parser.add_argument(
            "--lease",
            type=float,
            help="seconds a task is held before another worker may take it "
            "(default: REDISPARTS['QUEUE_LEASE']; extended while the task runs)",
        )
        parser.add_argument(
            "--concurrency", type=int, default=1, help="tasks run at once (default 1)"
        )
        parser.add_argument(
            "--pool",
            choices=["solo", "threads", "prefork"],
            help="where tasks run: this process (solo, the default for one task at a time), "
            "threads (for I/O-bound tasks) or child processes (prefork, the default for "
            "--concurrency above 1; needed to enforce --time-limit)",
        )
        parser.add_argument(
            "--prefetch",
            type=int,
            default=0,
            help="tasks claimed ahead of a free slot (default 0: none held unstarted)",
        )
        parser.add_argument(
            "--soft-time-limit",
            type=float,
            help="seconds after which SoftTimeLimitExceeded is raised in a task "
            "(default: REDISPARTS['QUEUE_SOFT_TIME_LIMIT'])",
        )
        parser.add_argument(
            "--time-limit",
            type=float,
            help="seconds after which the process running a task is killed and the task "
            "recorded as failed (prefork; default: REDISPARTS['QUEUE_TIME_LIMIT'])",
        )
        add_import_argument(parser)

    def handle(
        self,
        *args: Any,
        queues: Any,
        group: Any,
        burst: Any,
        max_tasks: Any,
        lease: Any,
        modules: Any,
        verbosity: Any,
        as_json: bool,
        **opts: Any,
    ) -> None:
        if max_tasks is not None and max_tasks < 1:
            raise CommandError(f"--max-tasks must be at least 1, got {max_tasks}", returncode=2)
        import_task_modules(modules)
        concurrency = opts["concurrency"]
        pool = opts["pool"] or ("prefork" if concurrency > 1 else "solo")
        try:
            worker = Worker(
                queues,
                group=group,
                lease=lease,
                concurrency=concurrency,
                pool=pool,
                prefetch=opts["prefetch"],
                soft_time_limit=opts["soft_time_limit"],
                time_limit=opts["time_limit"],
            )
        except (RedisPartsError, ValueError) as exc:
            raise CommandError(str(exc), returncode=2) from exc
        _log_to_stderr(verbosity)
        with progress_bar(
            stream=self.stderr,
            total=max_tasks,
            unit="task",
            desc="tasks",
            disable=None if verbosity >= 1 else True,  # None: only on a terminal
        ) as bar:
            outcomes = dict.fromkeys(OUTCOMES, 0)

            def finished(outcome: str) -> None:
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                bar.update()

            worker.on_finished = finished
            done = worker.run(burst=burst, max_tasks=max_tasks)
        text = f"Ran {done} task(s)." if verbosity >= 1 else None
        self.report({"tasks": done, **outcomes}, as_json=as_json, text=text)


def _log_to_stderr(verbosity: int) -> None:
    """Show the worker's own log lines (warnings; with -v 2 also start/stop) on stderr,
    unless the project's logging already handles them (no line printed twice)."""
    if not logger.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbosity >= 2 else logging.WARNING)
