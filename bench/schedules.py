"""Schedules: three schedulers on a one-second schedule, one run per slot, and lateness.

Three ``Scheduler`` processes and one ``Worker`` process run a ``@periodic(every=1)``
task for 10 minutes (6 s in a quick run; ``BENCH_SCHEDULES_SECONDS`` overrides both);
the task appends its slot and its start time to a file, outside Redis. Reported: slots
covered, slots run twice or lost between the first and the last, and the lateness from
the slot to the task's start (p50, p99: the scheduler's wake-up, the fire script, the
worker's claim). A second round SIGKILLs one scheduler every 20 s (every 2 s in a quick
run) and starts another in its place. Targets (issue 41): p50 ≤ 20 ms, p99 ≤ 100 ms.
Celery beat's and Huey's figures beside ours are not measured yet.

    .venv/bin/python -m bench.schedules [--quick]
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import statistics
import tempfile
import time
from pathlib import Path

import redis

from bench.harness import Check, Context, Ratio, Section, append_line, main
from redisparts_app.services.tasks import Scheduler, Worker, get_task, periodic, task

TIMEOUT = 1800
GROUP = QUEUE = "bench-schedules"
TASK_NAME = "bench.scheduled"
FORK = multiprocessing.get_context("fork")


def scheduled(path: str, slot: float) -> None:
    append_line(path, f"{slot!r} {time.time()!r}")


def _scheduler(url: str) -> None:
    Scheduler(GROUP, client=redis.Redis.from_url(url), reap=False).run()


def _worker(url: str) -> None:
    Worker([QUEUE], group=GROUP, client=redis.Redis.from_url(url)).run()


def start(target, url: str):
    process = FORK.Process(target=target, args=(url,), daemon=True)
    process.start()
    return process


def stop(process, sig: int = signal.SIGTERM) -> None:
    if process.is_alive():
        os.kill(process.pid, sig)
    process.join(10)
    if process.is_alive():
        process.kill()
        process.join()


def one_round(ctx: Context, seconds: float, kill_every: float | None) -> dict:
    ctx.client()  # an emptied server
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "runs")
        periodic(every=1.0, pass_slot=True, args=[path], name="bench.every-second")(
            get_task(TASK_NAME)
        )
        url = ctx.url()
        worker = start(_worker, url)
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
        for process in schedulers:
            stop(process)
        time.sleep(1.0)  # the last slot's run
        stop(worker)
        lines = Path(path).read_text().split() if Path(path).exists() else []
    pairs = [(float(lines[i]), float(lines[i + 1])) for i in range(0, len(lines), 2)]
    slots = sorted(slot for slot, _ in pairs)
    unique = sorted(set(slots))
    expected = round(unique[-1] - unique[0]) + 1 if unique else 0
    late = sorted(1000 * (started - slot) for slot, started in pairs)
    return {
        "slots": len(unique),
        "twice": len(slots) - len(unique),
        "lost": expected - len(unique),
        "p50": statistics.median(late) if late else float("nan"),
        "p99": late[min(len(late) - 1, int(0.99 * len(late)))] if late else float("nan"),
        "max": late[-1] if late else float("nan"),
        "kills": kills,
    }


def run(ctx: Context) -> list[Section]:
    if get_task(TASK_NAME) is None:
        task(name=TASK_NAME, queue=QUEUE, group=GROUP, max_retries=0)(scheduled)
    override = os.environ.get("BENCH_SCHEDULES_SECONDS")
    seconds = float(override) if override else ctx.seconds(600.0, 6.0)
    calm = one_round(ctx, seconds, None)
    killed = one_round(ctx, seconds, 2.0 if ctx.quick else 20.0)
    rows = [
        ["3 schedulers", calm["slots"], calm["twice"], calm["lost"], calm["p50"], calm["p99"],
         calm["max"]],
        [f"3 schedulers, {killed['kills']} SIGKILLs", killed["slots"], killed["twice"],
         killed["lost"], killed["p50"], killed["p99"], killed["max"]],
    ]  # fmt: skip
    return [
        Section(
            "Schedules: a 1 s schedule, 3 schedulers (lateness: slot to task start, ms)",
            ["run", "slots", "run twice", "lost", "p50 ms", "p99 ms", "max ms"],
            rows,
            ratios=[
                Ratio("lateness p50 / 20 ms", calm["p50"] / 20.0, target=1.0, at_most=True),
                Ratio("lateness p99 / 100 ms", calm["p99"] / 100.0, target=1.0, at_most=True),
            ],
            checks=[
                Check("each slot run once (3 schedulers)", calm["twice"] == calm["lost"] == 0),
                Check("each slot run once (SIGKILLs)", killed["twice"] == killed["lost"] == 0),
            ],
            notes=[
                f"{seconds:g} s per round on the TCP loopback server; one solo worker; "
                "runs counted in a file the task appends to",
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__ or "")
