"""Queues: redisparts' task queue against RQ, Huey and a bare RPUSH/BLPOP loop.

No-op tasks, one worker, on the TCP loopback server. In each round every queue in turn
(the order reversed every other round):

- enqueue: the benchmark process enqueues its jobs one call at a time through the
  queue's own API (jobs/s);
- process: one worker process, forked once every job is queued, runs them all (jobs/s
  from the worker's start to the end of the last job; the process start is left out).

Queues: redisparts (``TaskQueue.enqueue``, ``Worker``: at least once, with leases),
RQ 2 (``Queue.enqueue``; ``SimpleWorker`` runs jobs in the worker, ``Worker`` forks a
child per job), Huey 3 (``RedisHuey`` defaults, a consumer with one worker thread) and
the floor: RPUSH of a JSON body, and a worker looping on BLPOP. RQ's workers are slower,
so they get fewer jobs per round (the rate is per job either way).

Every job bumps its own slot in a shared-memory array (outside Redis), so the check that
each enqueued job ran exactly once does not rely on any queue's bookkeeping.

    .venv/bin/python -m bench.queues [--quick] [--repetitions 3]
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from multiprocessing.sharedctypes import RawArray
from typing import Any

import redis

from bench.harness import Check, Context, Ratio, Samples, Section, main, run_processes
from redisparts_app.services.tasks import TaskQueue, Worker, get_task, task

GROUP = QUEUE = "bench"
BARE_KEY = "bench:bare"
TASK_NAME = "bench.noop"

# Jobs per round; None: the full count.
JOBS = {"redisparts": None, "huey": None, "bare": None, "rq simple": 600, "rq fork": 120}
LABELS = {
    "redisparts": "redisparts TaskQueue + Worker",
    "rq simple": "RQ SimpleWorker",
    "rq fork": "RQ Worker (fork per job)",
    "huey": "Huey RedisHuey, 1 worker thread",
    "bare": "bare RPUSH / BLPOP loop",
}
# Ratios of redisparts to (queue, figure), with their targets.
TARGETS = [
    ("rq simple", "process", 10.0),
    ("huey", "process", 1.5),
    ("huey", "enqueue", 1.0),
    ("bare", "process", None),
    ("bare", "enqueue", None),
]


class Tally:
    """Shared-memory run counts and end times per job, inherited by forked workers."""

    def __init__(self, jobs: int) -> None:
        self.runs = RawArray("i", jobs)
        self.ended = RawArray("d", jobs)
        self.done = RawArray("i", 1)

    def record(self, index: int) -> None:
        self.runs[index] += 1
        self.ended[index] = time.perf_counter()
        self.done[0] += 1


# The tally of the round being measured, set before the worker forks.
TALLY: Tally | None = None


def noop(index: int) -> None:
    """The job of every queue: count the run of job ``index`` outside Redis."""
    TALLY.record(index)


# -- enqueue and work, per queue ----------------------------------------------------------


def redisparts_side(url: str):
    if get_task(TASK_NAME) is None:
        task(name=TASK_NAME, queue=QUEUE, max_retries=0)(noop)
    client = redis.Redis.from_url(url)
    queue = TaskQueue(GROUP, client=client)

    def enqueue(index: int) -> None:
        queue.enqueue(TASK_NAME, args=(index,), queue=QUEUE)

    def work(jobs: int) -> None:
        Worker([QUEUE], group=GROUP, client=redis.Redis.from_url(url)).run(burst=True)

    return enqueue, work


def rq_side(url: str, forking: bool):
    import rq

    name = f"{QUEUE}-fork" if forking else QUEUE  # both RQ queues are filled before work
    queue = rq.Queue(name, connection=redis.Redis.from_url(url))

    def enqueue(index: int) -> None:
        queue.enqueue(noop, index)

    def work(jobs: int) -> None:
        kind = rq.Worker if forking else rq.SimpleWorker
        connection = redis.Redis.from_url(url)
        worker = kind([rq.Queue(name, connection=connection)], connection=connection)
        worker.work(burst=True, logging_level="WARNING")

    return enqueue, work


def huey_side(url: str):
    from huey import RedisHuey

    huey = RedisHuey(QUEUE, url=url)
    huey_noop = huey.task(name="noop")(noop)

    def enqueue(index: int) -> None:
        huey_noop(index)

    def work(jobs: int) -> None:
        consumer = huey.create_consumer(workers=1, periodic=False, check_worker_health=False)
        consumer.start()
        while TALLY.done[0] < jobs:
            time.sleep(0.005)
        consumer.stop(graceful=True)

    return enqueue, work


def bare_side(url: str):
    client = redis.Redis.from_url(url)
    handlers = {"noop": noop}

    def enqueue(index: int) -> None:
        client.rpush(BARE_KEY, json.dumps({"name": "noop", "args": [index]}))

    def work(jobs: int) -> None:
        conn = redis.Redis.from_url(url)
        while found := conn.blpop([BARE_KEY], timeout=0.1):
            job = json.loads(found[1])
            handlers[job["name"]](*job["args"])

    return enqueue, work


def sides(url: str, label: str):
    if label == "redisparts":
        return redisparts_side(url)
    if label.startswith("rq"):
        return rq_side(url, forking=label == "rq fork")
    if label == "huey":
        return huey_side(url)
    return bare_side(url)


def start_and_work(work, jobs: int) -> float:
    """In the worker process: the perf_counter at the worker's start, then run the jobs."""
    logging.getLogger("huey").setLevel(logging.WARNING)
    started = time.perf_counter()
    work(jobs)
    return started


def enqueue_rates(enqueuers: dict, jobs: dict[str, int]) -> dict[str, float]:
    """Enqueue every queue's jobs call by call in turn; return 1 / median time per call."""
    times: dict[str, list[float]] = {label: [] for label in enqueuers}
    clock = time.perf_counter
    order = list(enqueuers.items())
    for index in range(max(jobs.values())):
        for label, enqueue in order if index % 2 else reversed(order):
            if index < jobs[label]:
                started = clock()
                enqueue(index)
                times[label].append(clock() - started)
    return {label: 1 / statistics.median(spent) for label, spent in times.items()}


def measure_round(ctx: Context, jobs: dict[str, int], reverse: bool) -> dict[str, Any]:
    """One round: fill every queue (interleaved), then run each queue's worker in turn."""
    global TALLY
    ctx.client()  # an emptied server
    made = {label: sides(ctx.url(), label) for label in LABELS}
    enqueue = enqueue_rates({label: side[0] for label, side in made.items()}, jobs)
    figures = {}
    for label in reversed(LABELS) if reverse else LABELS:
        TALLY = Tally(jobs[label])
        [started] = run_processes(start_and_work, [(made[label][1], jobs[label])])
        runs = list(TALLY.runs)
        figures[label] = {
            "enqueue": enqueue[label],
            "process": jobs[label] / (max(TALLY.ended) - started),
            "jobs": jobs[label],
            "ran_once": runs.count(1),
            "ran_more": sum(1 for count in runs if count > 1),
        }
    return figures


def run(ctx: Context) -> list[Section]:
    full = 150 if ctx.quick else 2000
    jobs = {label: min(full, count or full) for label, count in JOBS.items()}
    samples = Samples([measure_round(ctx, jobs, bool(n % 2)) for n in range(ctx.repetitions)])
    rows = [
        [
            LABELS[label],
            jobs[label],
            samples.median(label, "enqueue"),
            samples.spread(label, "enqueue"),
            samples.median(label, "process"),
            samples.spread(label, "process"),
            samples.ratio("redisparts", label, "process"),
        ]
        for label in LABELS
    ]
    exact = {
        label: all(round_[label]["ran_once"] == round_[label]["jobs"] for round_ in samples.rounds)
        for label in LABELS
    }
    return [
        Section(
            title="Queues: no-op jobs, one worker (TCP loopback)",
            columns=[
                "queue",
                "jobs/round",
                "enqueue/s",
                "range",
                "process/s",
                "range",
                "redisparts / this, process",
            ],
            rows=rows,
            ratios=[
                Ratio(
                    f"redisparts / {LABELS[other]}, {figure}",
                    samples.ratio("redisparts", other, figure),
                    target,
                )
                for other, figure, target in TARGETS
            ],
            checks=[
                Check(
                    f"{LABELS[label]}: every job ran exactly once",
                    exact[label],
                    "counted in shared memory outside Redis, every round",
                )
                for label in LABELS
            ],
            notes=[
                f"median of {ctx.repetitions} rounds; enqueue: the queues take turns call by "
                "call, 1 / median time per call; process: the workers take turns, from the "
                "worker's start to the end of its last job",
            ],
        )
    ]


if __name__ == "__main__":
    # Run the functions of bench.queues, not of __main__: the jobs RQ and our worker
    # import by name must see the tally this module sets.
    from bench import queues

    main(queues.run, __doc__.splitlines()[0])
