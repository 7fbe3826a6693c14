"""Cancellation: 1,000 cancels racing two workers; each task runs once or never.

1,000 tasks (200 in a quick run) are enqueued; two solo ``Worker`` processes start on them
and, once the first task has run, this process cancels every task in a random order.
A task appends its id to a file, outside Redis, unless ``aborted()`` says it was
cancelled. Reported per round: the tasks that ran (in the file), those cancelled
(recorded CANCELLED), the cancels that found a task running (``aborting``), the
violations (a task in the file twice, or in the file and not SUCCESSFUL, or SUCCESSFUL
and not in the file, or neither SUCCESSFUL nor CANCELLED: must be 0), and the latency
of one ``TaskQueue.cancel`` (p50, p99) while the workers claim beside it. Target
(issue 41): every task either ran exactly once or was cancelled and never ran.

    .venv/bin/python -m bench.cancels [--quick]
"""

from __future__ import annotations

import multiprocessing
import random
import statistics
import tempfile
import time
from pathlib import Path

import redis

from bench.harness import Check, Context, Section, append_line, main
from redisparts_app.services.tasks import TaskQueue, Worker, aborted, get_task, task

TIMEOUT = 900
GROUP = QUEUE = "bench-cancels"
TASK_NAME = "bench.cancel_append"
FORK = multiprocessing.get_context("fork")


def append(path: str, task_id: str) -> None:
    time.sleep(0.001)  # a task that takes a moment, so cancels find some running
    if not aborted():
        append_line(path, task_id)


def _worker(url: str) -> None:
    Worker([QUEUE], group=GROUP, client=redis.Redis.from_url(url), block=0.05).run(burst=True)


def one_round(ctx: Context, count: int, seed: int) -> dict:
    client = ctx.client()  # an emptied server
    queue = TaskQueue(GROUP, client=client)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ran"
        path.touch()
        ids = [f"t{seed}-{n}" for n in range(count)]
        for task_id in ids:
            queue.enqueue(TASK_NAME, args=[str(path), task_id], queue=QUEUE, task_id=task_id)
        workers = [FORK.Process(target=_worker, args=(ctx.url(),)) for _ in range(2)]
        for worker in workers:
            worker.start()
        while path.stat().st_size == 0:  # the workers have started: the race is on
            time.sleep(0.0005)
        order = list(ids)
        random.Random(seed).shuffle(order)
        said, latencies = {}, []
        for task_id in order:
            started = time.perf_counter()
            said[task_id] = str(queue.cancel(task_id))
            latencies.append(1e6 * (time.perf_counter() - started))
        for worker in workers:
            worker.join(120)
            if worker.is_alive():
                worker.kill()
                worker.join()
        lines = path.read_text().split()
    ran = set(lines)
    states = {task_id: queue.result(task_id).state for task_id in ids}
    violations = len(lines) - len(ran)  # a task run twice
    for task_id in ids:
        state = states[task_id]
        if (
            state not in ("SUCCESSFUL", "CANCELLED")
            or (state == "SUCCESSFUL") != (task_id in ran)
            or (said[task_id] == "cancelled" and state != "CANCELLED")
        ):
            violations += 1
    latencies.sort()
    return {
        "tasks": count,
        "ran": len(ran),
        "cancelled": sum(state == "CANCELLED" for state in states.values()),
        "aborting": sum(outcome == "aborting" for outcome in said.values()),
        "violations": violations,
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def run(ctx: Context) -> list[Section]:
    if get_task(TASK_NAME) is None:  # registered once Django is set up
        task(name=TASK_NAME, queue=QUEUE, group=GROUP, max_retries=0)(append)
    count = 200 if ctx.quick else 1000
    rounds = [one_round(ctx, count, seed) for seed in range(ctx.repetitions)]
    rows = [
        [index + 1, r["tasks"], r["ran"], r["cancelled"], r["aborting"], r["violations"],
         r["p50"], r["p99"]]
        for index, r in enumerate(rounds)
    ]  # fmt: skip
    violations = sum(r["violations"] for r in rounds)
    return [
        Section(
            "Cancellation: cancels racing two workers",
            ["round", "tasks", "ran", "cancelled", "aborting", "violations", "p50 µs", "p99 µs"],
            rows,
            checks=[
                Check(
                    "each task ran exactly once or was cancelled and never ran",
                    violations == 0,
                    f"{violations} violation(s) over {len(rounds)} round(s)",
                )
            ],
            notes=[
                "two solo workers and one canceller (this process) on the TCP loopback "
                "server; runs counted in a file the task appends to unless aborted(); "
                "cancel latency: one TaskQueue.cancel (a read of the record, then the "
                "cancel script) while the workers claim beside it",
            ],
        )
    ]


if __name__ == "__main__":
    main(run, __doc__ or "")
