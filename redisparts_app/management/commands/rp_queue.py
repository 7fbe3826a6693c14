import dataclasses
import sys
from collections.abc import Iterator
from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.exceptions import InvalidTask, TaskNotFound
from redisparts_app.keys import validate_key_part
from redisparts_app.management.base import RedisCommand
from redisparts_app.services.tasks import Cancel, TaskInfo, TaskQueue, queue_groups

# The lists besides the queues, each paged by the TaskQueue method of its name.
LISTS = ("delayed", "inflight", "failed", "quarantined")
PAGE = 500  # tasks read per call when an action goes through a whole list


class Command(RedisCommand):
    help = (
        "Look at and act on the task queues: stats, list (ready, delayed, inflight, failed, "
        "quarantined), retry or delete failed and quarantined tasks by id or in bulk, cancel "
        "tasks by id (waiting: never run; running: asked to stop), purge a queue's ready tasks."
    )
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "action", choices=["stats", "list", "retry", "delete", "cancel", "purge"]
        )
        parser.add_argument(
            "ids",
            nargs="*",
            metavar="ID",
            help="retry, delete: the failed or quarantined tasks; cancel: the tasks",
        )
        parser.add_argument("--group", help="queue group (stats: every group by default)")
        parser.add_argument(
            "--kind", choices=["ready", *LISTS], default="failed", help="list: which tasks"
        )
        parser.add_argument(
            "--queue", default="default", help="list --kind ready, purge: the queue"
        )
        parser.add_argument("--start", type=int, default=0, help="list: from this position")
        parser.add_argument("--count", type=int, default=20, help="list: this many tasks")
        parser.add_argument(
            "--all", action="store_true", help="retry, delete: every failed and quarantined task"
        )
        parser.add_argument("--name", help="with --all: only the tasks of this name")
        parser.add_argument("--yes", action="store_true", help="do not ask before a bulk action")

    def handle(
        self, *args: Any, action: str, group: str | None, as_json: bool, **opts: Any
    ) -> None:
        if opts["ids"] and action not in ("retry", "delete", "cancel"):
            raise CommandError(f"{action} takes no task ids", returncode=2)
        if action == "cancel":
            self._cancel(group, opts["ids"], as_json)
            return
        client = self.connect()
        if action == "stats":
            groups = [group] if group else queue_groups(client=client, with_default=True)
            counts = {name: TaskQueue(name, client=client).counts() for name in groups}
            text = "\n".join(_stats_line(name, figures) for name, figures in counts.items())
            self.report(counts, as_json=as_json, text=text)
            return
        queue = TaskQueue(group, client=client)
        if action == "list":
            if opts["kind"] == "ready":
                tasks = queue.peek(opts["queue"], opts["start"], opts["count"])
            else:
                tasks = getattr(queue, opts["kind"])(opts["start"], opts["count"])
            text = "\n".join(_task_line(task) for task in tasks) or "No task."
            self.report([dataclasses.asdict(t) for t in tasks], as_json=as_json, text=text)
            return
        if action == "purge":
            self._confirm(opts["yes"], f"delete every ready task of queue {opts['queue']!r}")
            done = _apply(queue.delete, _ready_ids(queue, opts["queue"]))
            self.report(done, as_json=as_json, text=f"Deleted {len(done['done'])} task(s).")
            return
        ids = self._chosen(queue, opts)
        method = queue.requeue if action == "retry" else queue.delete
        done = _apply(method, ids)
        verb = "Put back" if action == "retry" else "Deleted"
        text = f"{verb} {len(done['done'])} task(s)."
        if done["not_found"]:
            where = "failed or quarantined" if action == "retry" else "found"
            text += f" Not {where} (any more): {', '.join(done['not_found'])}."
        self.report(done, as_json=as_json, text=text)
        if done["not_found"] and not done["done"]:
            raise CommandError("no task was found", returncode=1)

    def _cancel(self, group: str | None, ids: list[str], as_json: bool) -> None:
        """Cancel each task; report what each cancel did (exit 1 if none was known)."""
        if not ids:
            raise CommandError("cancel needs the ids of the tasks", returncode=2)
        for task_id in ids:  # every id checked before any is cancelled
            try:
                validate_key_part(task_id, "task id")
            except ValueError as exc:
                raise CommandError(str(exc), returncode=2) from exc
        queue = TaskQueue(group, client=self.connect())
        said: dict[str, list[str]] = {str(outcome): [] for outcome in Cancel}
        for task_id in dict.fromkeys(ids):
            try:
                said[queue.cancel(task_id)].append(task_id)
            except InvalidTask as exc:
                raise CommandError(str(exc), returncode=2) from exc
        text = "\n".join(
            f"{outcome}: {', '.join(found)}" for outcome, found in said.items() if found
        )
        self.report(said, as_json=as_json, text=text)
        if len(said[Cancel.UNKNOWN]) == len(set(ids)):
            raise CommandError("no task was found", returncode=1)

    def _chosen(self, queue: TaskQueue, opts: dict[str, Any]) -> list[str]:
        if opts["all"] == bool(opts["ids"]):
            raise CommandError("give task ids, or --all (with --name to narrow it)", returncode=2)
        if not opts["all"]:
            if opts["name"]:
                raise CommandError("--name goes with --all", returncode=2)
            return list(opts["ids"])
        what = f"tasks named {opts['name']!r}" if opts["name"] else "tasks"
        self._confirm(opts["yes"], f"act on every failed and quarantined {what}")
        return [
            task.id
            for kind in ("failed", "quarantined")
            for task in _every(queue, kind)
            if not opts["name"] or task.name == opts["name"]
        ]

    def _confirm(self, yes: bool, what: str) -> None:
        if yes:
            return
        if not sys.stdin.isatty():
            raise CommandError(f"refusing to {what} without --yes", returncode=2)
        if input(f"About to {what}. Type yes to go on: ").strip().lower() != "yes":
            raise CommandError("nothing done", returncode=1)


def _every(queue: TaskQueue, kind: str) -> Iterator[TaskInfo]:
    """Every task of a list, read a page at a time from its start (the list may shrink)."""
    start = 0
    while page := getattr(queue, kind)(start, PAGE):
        yield from page
        start += len(page)


def _ready_ids(queue: TaskQueue, name: str) -> list[str]:
    ids, start = [], 0
    while page := queue.peek(name, start, PAGE):
        ids += [task.id for task in page]
        start += len(page)
    return ids


def _apply(method: Any, ids: list[str]) -> dict[str, list[str]]:
    done: dict[str, list[str]] = {"done": [], "not_found": []}
    for task_id in ids:
        try:
            method(task_id)
        except TaskNotFound:
            done["not_found"].append(task_id)
        else:
            done["done"].append(task_id)
    return done


def _stats_line(group: str, counts: dict[str, Any]) -> str:
    ready = ", ".join(f"{name} {count}" for name, count in counts["queues"].items()) or "none"
    others = ", ".join(f"{kind} {counts[kind]}" for kind in LISTS_COUNTED)
    limits = "".join(f"; {name} {_limit_text(limit)}" for name, limit in counts["limits"].items())
    return f"{group}: ready {ready}; {others}{limits}"


LISTS_COUNTED = ("delayed", "inflight", "failed", "quarantine")


def _limit_text(limit: dict[str, Any]) -> str:
    """A limited queue's figures: its runs against its limits, and the runs waiting."""
    said = []
    if limit["concurrency"]:
        said.append(f"{len(limit['held'])} of {limit['concurrency']} running")
    if limit["rate_limit"]:
        said.append(f"{limit['started']} started of {limit['rate_limit']}")
    return ", ".join([*(said or ["limits not registered here"]), f"{limit['waiting']} waiting"])


def _task_line(task: TaskInfo) -> str:
    error = f"  {task.error}" if task.error else ""
    return f"{task.id}  {task.name}  queue {task.queue}  deliveries {task.deliveries}{error}"
