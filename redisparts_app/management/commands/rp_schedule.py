from datetime import UTC, datetime
from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.management.base import (
    RedisCommand,
    add_import_argument,
    import_task_modules,
)
from redisparts_app.services.tasks import schedules
from redisparts_app.services.tasks.schedules import ScheduleState


class Command(RedisCommand):
    help = (
        "List the periodic schedules (timing, paused, last and next fire times, last run), "
        "pause or resume one, run one now, or set or reset its timing at run time."
    )
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["list", "pause", "resume", "run", "set", "reset"])
        parser.add_argument("name", nargs="?", help="the schedule (all but list)")
        parser.add_argument("--cron", help="set: a cron expression (5 fields, 6 with seconds)")
        parser.add_argument("--every", type=float, help="set: an interval in seconds")
        parser.add_argument("--tz", default="UTC", help="set: the cron's time zone (default UTC)")
        add_import_argument(parser, "schedules")

    def handle(self, *args: Any, action: str, name: str | None, as_json: bool, **opts: Any) -> None:
        import_task_modules(opts["modules"])
        if (action == "list") != (name is None):
            wanted = "takes no name" if action == "list" else "needs a schedule name"
            raise CommandError(f"{action} {wanted}", returncode=2)
        if action != "set" and (opts["cron"] or opts["every"] is not None):
            raise CommandError("--cron and --every go with set only", returncode=2)
        client = self.connect()
        if action == "list":
            found = schedules.states(client=client)
            now = schedules.server_now(client)
            rows = [_row(state, now) for state in found]
            text = "\n".join(_line(row) for row in rows) or "No schedule is declared."
            self.report(rows, as_json=as_json, text=text)
            return
        assert name is not None
        schedules.get_schedule(name)  # ScheduleNotFound (exit 2) before anything is sent
        if action == "pause":
            schedules.pause(name, client=client)
            text = f"Paused {name}."
        elif action == "resume":
            schedules.resume(name, client=client)
            text = f"Resumed {name}: it fires from its next slot."
        elif action == "run":
            task_id = schedules.run_now(name, client=client)
            text = f"Enqueued a run of {name}: task {task_id}."
        elif action == "set":
            timing = schedules.set_timing(
                name, cron=opts["cron"], every=opts["every"], tz=opts["tz"], client=client
            )
            text = f"{name} now fires {timing.describe()}."
        else:
            schedules.reset_timing(name, client=client)
            text = f"{name} fires as declared in code again."
        now = schedules.server_now(client)
        self.report(_row(schedules.state(name, client=client), now), as_json=as_json, text=text)


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat()


def _row(state: ScheduleState, now: float) -> dict[str, Any]:
    """What list shows of one schedule, times in ISO 8601 UTC."""
    run = state.run
    return {
        "name": state.name,
        "task": state.task,
        "group": state.group,
        "timing": state.timing.as_dict(),
        "edited": state.edited,
        "catch_up": state.catch_up,
        "paused": state.paused,
        "last_slot": _iso(state.last_slot),
        "next": [_iso(slot) for slot in state.next_slots(now)],
        "last_run": None if run is None else {**run, "at": _iso(run["at"])},
    }


def _line(row: dict[str, Any]) -> str:
    timing = row["timing"]
    when = f"every {timing['every']:g}s" if timing["every"] else f"{timing['cron']} {timing['tz']}"
    state = "paused" if row["paused"] else f"next {row['next'][0] if row['next'] else '-'}"
    run = row["last_run"]
    last = f"last run {run['outcome']} at {run['at']}" if run else "never run"
    edited = " (edited)" if row["edited"] else ""
    return f"{row['name']}: {when}{edited}; {state}; {last}"
