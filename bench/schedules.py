"""Schedules: one run per slot and lateness, beside Celery beat and Huey in the same run.

Round one, side by side on one redis-server (a database each): three of our
``Scheduler`` processes and a ``Worker`` on a ``@periodic(every=1)`` task; Celery beat
(a 1 s interval entry, the Redis broker, a solo-pool worker, prefetch 1, acks late); and
Huey's consumer on ``@periodic_task(crontab())``: a minute, its finest schedule, so its
slots are minutes. Each task appends its slot and its start time to a file, outside
Redis. Reported per peer: slots run, slots run twice and slots lost between the first
and the last, and the lateness from the slot to the task's start (p50, p99). Celery
beat's slot is its own due time (the last send + 1 s, so its interval drifts: the drift
shows as lost slots on a 1 s grid); Huey's is the minute. Round two: one of our three
schedulers SIGKILLed every 20 s and restarted, beside two Celery beats on one schedule
(beat is meant to run once; two fire each slot twice). Rounds last 10 minutes (6 s in a
quick run; ``BENCH_SCHEDULES_SECONDS`` sets both). Targets (issue 41, ours): p50 ≤ 20
ms, p99 ≤ 100 ms, each slot run once in both rounds.

    .venv/bin/python -m bench.schedules [--quick]
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import random
import signal
import statistics
import tempfile
import time
from pathlib import Path

import redis

from bench.harness import Check, Context, Ratio, Section, append_line, main, serve_celery
from bench.harness import start_process as start
from bench.harness import stop_process as stop
from redisparts_app.services.tasks import Scheduler, Worker, get_task, periodic, task

TIMEOUT = 1800
GROUP = QUEUE = "bench-schedules"
TASK_NAME = "bench.scheduled"
CELERY_TASK = "bench.celery_scheduled"
FORK = multiprocessing.get_context("fork")
LABELS = {
    "ours": "redisparts, 3 schedulers",
    "celery": "Celery beat, 1 s interval",
    "huey": "Huey crontab(), 1 minute",
    "killed": "redisparts, 3 schedulers, {kills} SIGKILLs",
    "two beats": "Celery, two beats",
}
# The file Huey's periodic task appends to (it takes no arguments), set before the fork.
HUEY_FILE = ""


def scheduled(path: str, slot: float) -> None:
    append_line(path, f"{slot!r} {time.time()!r}")


def huey_scheduled() -> None:
    now = time.time()
    scheduled(HUEY_FILE, now - now % 60)


def db_url(url: str, db: int) -> str:
    return f"{url.rsplit('/', 1)[0]}/{db}"


# -- the processes ---------------------------------------------------------------------


def _scheduler(url: str) -> None:
    Scheduler(GROUP, client=redis.Redis.from_url(url), reap=False).run()


def _worker(url: str) -> None:
    Worker([QUEUE], group=GROUP, client=redis.Redis.from_url(url)).run()


def celery_app(url: str, path: str):
    from celery import Celery

    app = Celery("bench-beat", broker=url)
    app.conf.update(
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        beat_schedule={"every-second": {"task": CELERY_TASK, "schedule": 1.0, "args": (path,)}},
    )
    app.task(name=CELERY_TASK)(scheduled)
    return app


def _celery_worker(url: str, path: str) -> None:
    serve_celery(celery_app(url, path))


def _celery_beat(url: str, path: str) -> None:
    from celery.beat import Scheduler as BeatScheduler
    from celery.beat import Service

    class DueScheduler(BeatScheduler):
        """Beat's in-memory scheduler, passing each run its due time as ``slot`` (beat
        sends it with nothing of the kind): what the lateness is measured from."""

        def apply_async(self, entry, producer=None, advance=True, **kwargs):
            due = entry.last_run_at.timestamp() + entry.schedule.run_every.total_seconds()
            entry.kwargs = {**entry.kwargs, "slot": due}
            return super().apply_async(entry, producer, advance, **kwargs)

    logging.getLogger("celery").setLevel(logging.ERROR)
    Service(celery_app(url, path), scheduler_cls=DueScheduler, max_interval=1.0).start()


def _huey_consumer(url: str, at: float) -> None:
    from huey import RedisHuey, crontab

    logging.getLogger("huey").setLevel(logging.ERROR)
    huey = RedisHuey("bench-schedules", url=url, utc=True)
    huey.periodic_task(crontab(), name="huey_scheduled")(huey_scheduled)
    time.sleep(max(0.0, at - time.time()))
    huey.create_consumer(workers=1, periodic=True, check_worker_health=False).run()


# -- a round ---------------------------------------------------------------------------


def tally(path: Path, period: float) -> dict:
    """Runs per slot (a grid of ``period`` from the first slot) and lateness, from the file."""
    lines = path.read_text().split() if path.exists() else []
    pairs = [(float(lines[i]), float(lines[i + 1])) for i in range(0, len(lines), 2)]
    if not pairs:
        return dict.fromkeys(["slots", "twice", "lost"], 0) | dict.fromkeys(
            ["p50", "p99", "max"], float("nan")
        )
    first = min(slot for slot, _ in pairs)
    slots = [round((slot - first) / period) for slot, _ in pairs]
    unique = set(slots)
    late = sorted(1000 * (started - slot) for slot, started in pairs)
    return {
        "slots": len(unique),
        "twice": len(slots) - len(unique),
        "lost": max(unique) + 1 - len(unique),
        "p50": statistics.median(late),
        "p99": late[min(len(late) - 1, int(0.99 * len(late)))],
        "max": late[-1],
    }


def one_round(ctx: Context, seconds: float, kill_every: float | None) -> dict:
    """Ours (with SIGKILLs when ``kill_every``) beside Celery beat and Huey (calm), or
    beside two Celery beats (with SIGKILLs); return each one's tally."""
    global HUEY_FILE
    ctx.client()  # an emptied server
    with tempfile.TemporaryDirectory() as folder:
        files = {label: Path(folder) / label for label in ("ours", "celery", "huey")}
        HUEY_FILE = str(files["huey"])
        periodic(every=1.0, pass_slot=True, args=[str(files["ours"])], name="bench.every-second")(
            get_task(TASK_NAME)
        )
        url = ctx.url()
        celery_url = db_url(url, 1)
        workers = [start(_worker, url), start(_celery_worker, celery_url, str(files["celery"]))]
        if not kill_every:
            # Huey checks its periodic tasks every 60 s from its consumer's start: started
            # on a minute, its best case (else each run comes at that start's second).
            at = math.ceil(time.time() / 60 + 1 / 30) * 60
            workers.append(start(_huey_consumer, db_url(url, 2), at))
        time.sleep(2.0)  # the workers ready
        beats = [start(_celery_beat, celery_url, str(files["celery"]))]
        if kill_every:
            beats.append(start(_celery_beat, celery_url, str(files["celery"])))
        schedulers = [start(_scheduler, url) for _ in range(3)]
        rng = random.Random(41)
        kills = 0
        deadline = time.monotonic() + seconds
        next_kill = time.monotonic() + (kill_every or seconds + 1)
        while time.monotonic() < deadline:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
            if kill_every and time.monotonic() >= next_kill:
                victim = rng.randrange(3)
                stop(schedulers[victim], signal.SIGKILL)
                schedulers[victim] = start(_scheduler, url)
                kills += 1
                next_kill += kill_every
        for process in schedulers + beats:
            stop(process)
        time.sleep(1.5)  # the last slot's runs
        for process in workers:
            stop(process)
        figures = {
            "ours": tally(files["ours"], 1.0),
            "celery": tally(files["celery"], 1.0),
            "huey": tally(files["huey"], 60.0),
        }
    figures["ours"]["kills"] = kills
    return figures


def run(ctx: Context) -> list[Section]:
    if get_task(TASK_NAME) is None:
        task(name=TASK_NAME, queue=QUEUE, group=GROUP, max_retries=0)(scheduled)
    override = os.environ.get("BENCH_SCHEDULES_SECONDS")
    seconds = float(override) if override else ctx.seconds(600.0, 6.0)
    calm = one_round(ctx, seconds, None)
    killed = one_round(ctx, seconds, 2.0 if ctx.quick else 20.0)
    ours, kill = calm["ours"], killed["ours"]
    measured = [
        (LABELS["ours"], ours),
        (LABELS["celery"], calm["celery"]),
        (LABELS["huey"], calm["huey"]),
        (LABELS["killed"].format(kills=kill["kills"]), kill),
        (LABELS["two beats"], killed["celery"]),
    ]
    columns = ["slots", "twice", "lost", "p50", "p99", "max"]
    return [
        Section(
            "Schedules: runs per slot and lateness (slot to task start, ms), side by side",
            ["schedule", "slots", "run twice", "lost", "p50 ms", "p99 ms", "max ms"],
            [[label] + [figures[key] for key in columns] for label, figures in measured],
            ratios=[
                Ratio("lateness p50 / 20 ms", ours["p50"] / 20.0, target=1.0, at_most=True),
                Ratio("lateness p99 / 100 ms", ours["p99"] / 100.0, target=1.0, at_most=True),
                *[
                    Ratio(f"redisparts / {LABELS[peer]}, lateness {q}", ours[q] / calm[peer][q])
                    for peer in ("celery", "huey")
                    for q in ("p50", "p99")
                ],
            ],
            checks=[
                Check("each slot run once (3 schedulers)", ours["twice"] == ours["lost"] == 0),
                Check("each slot run once (SIGKILLs)", kill["twice"] == kill["lost"] == 0),
            ],
            notes=[
                f"{seconds:g} s per round on the TCP loopback server, the three queues at "
                "once (a database each); one solo worker each; runs counted in a file",
                "Huey: crontab() (every minute) is its finest schedule; slots are minutes",
                "Celery beat: slot = its due time (last send + 1 s); that drift on a 1 s "
                "grid counts as lost; two beats: its documented limit, shown for context",
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__ or "")
