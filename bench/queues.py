"""Queues: redisparts' task queue against Celery, Dramatiq, Huey, RQ and a bare RPUSH/BLPOP loop.

Every job marks its start and its end in shared-memory arrays (outside Redis), so the
checks that each enqueued job ran exactly once, and the latencies, do not rely on any
queue's bookkeeping. Peers run as their documents advise for reliable delivery: Celery 5
with the Redis broker, the solo pool, ``worker_prefetch_multiplier=1`` and
``task_acks_late=True``; Dramatiq 2 with its RedisBroker, one process with one thread;
Huey 3 (``RedisHuey``, one worker thread); RQ 2 (``SimpleWorker`` runs jobs in the
worker, ``Worker`` forks a child per job). redisparts runs with its defaults: one task at
a time in the worker (solo pool), no prefetch, each task acknowledged as it ends.

Sections, on the TCP loopback server:

- throughput: no-op jobs, one worker; enqueue (jobs/s, one call at a time, queues taking
  turns call by call in a new random order each turn, beside our enqueue script called
  bare: the floor of our enqueue) and
  process (jobs/s from the worker's start to its last job's end);
- two workers, jobs of 1 ms: process rate of two worker processes;
- latency: from enqueue to the job's start, 100 jobs/s into a running idle worker;
- fairness (redisparts): two workers, 200 jobs of which 20 sleep 100 ms (every tenth, or
  the last twenty): makespan against the lower bound max(work / 2, longest job);
- duplicates per kill (redisparts): a worker of two child processes SIGKILLed 20 times
  under load, then a healthy one finishes: re-runs per kill and lost jobs;
- recovery (redisparts): a worker holding a long job is SIGKILLed while another idles:
  seconds until the job starts again on the other, with the default 60 s lease.

    .venv/bin/python -m bench.queues [--quick] [--repetitions 3]
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import random
import signal
import statistics
import threading
import time
import warnings
from multiprocessing.sharedctypes import RawArray
from typing import Any

import redis

from bench import harness
from bench.harness import Check, Context, Ratio, Samples, Section, main, run_processes
from redisparts_app.services.tasks import TaskQueue, Worker, get_task, task

GROUP = QUEUE = "bench"
BARE_KEY = "bench:bare"
TASK_NAME = "bench.job"
FORK = multiprocessing.get_context("fork")

# Jobs per round of the throughput section; None: the full count.
JOBS = {
    "redisparts": None,
    "celery": None,
    "dramatiq": None,
    "huey": None,
    "bare": None,
    "rq simple": 600,
    "rq fork": 120,
}
LABELS = {
    "redisparts": "redisparts TaskQueue + Worker",
    "celery": "Celery, solo pool, acks late, prefetch 1",
    "dramatiq": "Dramatiq RedisBroker, 1 thread",
    "rq simple": "RQ SimpleWorker",
    "rq fork": "RQ Worker (fork per job)",
    "huey": "Huey RedisHuey, 1 worker thread",
    "bare": "bare RPUSH / BLPOP loop",
}
PEERS = ["celery", "dramatiq", "huey", "rq simple"]
# Ratios of redisparts to (queue, figure), with their targets.
TARGETS = [
    ("huey", "process", 1.0),
    ("celery", "process", 5.0),
    ("rq simple", "process", 20.0),
    ("dramatiq", "process", None),
    ("huey", "enqueue", 1.0),
    ("bare", "process", None),
    ("bare", "enqueue", None),
    ("script", "enqueue", 0.9),
]
# The floor of our enqueue: its script called bare, enqueue only (no worker).
SCRIPT_LABEL = "queue_enqueue script called bare (the floor of our enqueue)"


class Tally:
    """Shared-memory starts, runs and end times per job, inherited by forked workers."""

    def __init__(self, jobs: int) -> None:
        self.starts = RawArray("i", jobs)
        self.started = RawArray("d", jobs)
        self.runs = RawArray("i", jobs)
        self.ended = RawArray("d", jobs)
        # Bumped by several worker processes at once: under its lock.
        self.finished = FORK.Value("i", 0)

    def start(self, index: int) -> None:
        self.starts[index] += 1
        self.started[index] = time.perf_counter()

    def end(self, index: int) -> None:
        self.runs[index] += 1
        self.ended[index] = time.perf_counter()
        with self.finished.get_lock():
            self.finished.value += 1


# The tally of the round being measured, set before the workers fork.
TALLY: Tally | None = None


def job(index: int, seconds: float = 0.0) -> None:
    """The job of every queue: mark its start and end outside Redis, sleeping between."""
    TALLY.start(index)
    if seconds:
        time.sleep(seconds)
    TALLY.end(index)


def wait_for(jobs: int) -> None:
    while TALLY.finished.value < jobs:
        time.sleep(0.002)


# -- enqueue and work, per queue ----------------------------------------------------------


def redisparts_side(url: str):
    if get_task(TASK_NAME) is None:
        # No result kept, as the peers keep none of a job that returns nothing (Celery
        # without a result backend, Huey's store_none=False), so all do the same work.
        task(name=TASK_NAME, queue=QUEUE, max_retries=0, result=False)(job)
    queue = TaskQueue(GROUP, client=redis.Redis.from_url(url))

    def enqueue(index: int, seconds: float = 0.0) -> None:
        queue.enqueue(TASK_NAME, args=(index, seconds), queue=QUEUE)

    def work(jobs: int, burst: bool = True) -> None:
        worker = Worker([QUEUE], group=GROUP, client=redis.Redis.from_url(url))
        if burst:
            worker.run(burst=True)
        else:
            worker.run(max_tasks=jobs)

    return enqueue, work


def celery_side(url: str):
    from celery import Celery

    app = Celery("bench", broker=url)
    app.conf.update(
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    celery_job = app.task(name="bench.celery_job")(job)

    def enqueue(index: int, seconds: float = 0.0) -> None:
        celery_job.delay(index, seconds)

    def work(jobs: int, burst: bool = True) -> None:
        def stop_when_done() -> None:
            wait_for(jobs)
            os.kill(os.getpid(), signal.SIGTERM)  # Celery's warm shutdown

        threading.Thread(target=stop_when_done, daemon=True).start()
        harness.serve_celery(app)

    return enqueue, work


def dramatiq_side(url: str):
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=url)
    dramatiq.set_broker(broker)
    actor = dramatiq.actor(job, broker=broker, max_retries=0, actor_name="bench_job")

    def enqueue(index: int, seconds: float = 0.0) -> None:
        actor.send(index, seconds)

    def work(jobs: int, burst: bool = True) -> None:
        worker = dramatiq.Worker(broker, worker_threads=1)
        worker.start()
        wait_for(jobs)
        worker.stop()

    return enqueue, work


def rq_side(url: str, forking: bool):
    import rq

    name = f"{QUEUE}-fork" if forking else QUEUE  # both RQ queues are filled before work
    queue = rq.Queue(name, connection=redis.Redis.from_url(url))

    def enqueue(index: int, seconds: float = 0.0) -> None:
        queue.enqueue(job, index, seconds)

    def work(jobs: int, burst: bool = True) -> None:
        kind = rq.Worker if forking else rq.SimpleWorker
        connection = redis.Redis.from_url(url)
        worker = kind([rq.Queue(name, connection=connection)], connection=connection)
        worker.work(burst=True, logging_level="WARNING")

    return enqueue, work


def huey_side(url: str):
    from huey import RedisHuey

    huey = RedisHuey(QUEUE, url=url)
    huey_job = huey.task(name="job")(job)

    def enqueue(index: int, seconds: float = 0.0) -> None:
        huey_job(index, seconds)

    def work(jobs: int, burst: bool = True) -> None:
        logging.getLogger("huey").setLevel(logging.WARNING)
        consumer = huey.create_consumer(workers=1, periodic=False, check_worker_health=False)
        consumer.start()
        wait_for(jobs)
        consumer.stop(graceful=True)

    return enqueue, work


def bare_side(url: str):
    client = redis.Redis.from_url(url)
    handlers = {"job": job}

    def enqueue(index: int, seconds: float = 0.0) -> None:
        client.rpush(BARE_KEY, json.dumps({"name": "job", "args": [index, seconds]}))

    def work(jobs: int, burst: bool = True) -> None:
        conn = redis.Redis.from_url(url)
        while TALLY.finished.value < jobs:
            found = conn.blpop([BARE_KEY], timeout=0.1)
            if found:
                body = json.loads(found[1])
                handlers[body["name"]](*body["args"])
            elif burst:
                break

    return enqueue, work


def script_enqueuer(url: str):
    """Enqueue as our algorithm does at its leanest: the record a worker runs and the
    admin shows (the members of ours, made by one json.dumps) and one EVALSHA of
    queue_enqueue.lua with its keys built once, no checks, no database transaction."""
    from redisparts_app import lua
    from redisparts_app.conf import app_settings
    from redisparts_app.services.tasks.queue import WAKE_CAP, _enqueue_keys

    client = redis.Redis.from_url(url)
    keys = _enqueue_keys(app_settings.KEY_PREFIX, f"{GROUP}-floor", QUEUE)
    sha = lua.script(client, "queue_enqueue").sha
    client.script_load(lua.source("queue_enqueue"))

    def enqueue(index: int, seconds: float = 0.0) -> None:
        task_id = os.urandom(16).hex()
        now = time.time()
        body = json.dumps(
            {"id": task_id, "name": TASK_NAME, "queue": QUEUE, "retries": 0, "max_retries": 0,
             "enqueued_at": now, "ready_at": now, "kind": "task", "args": [index, seconds],
             "kwargs": {}}
        )  # fmt: skip
        client.evalsha(sha, len(keys), *keys, task_id, body, QUEUE, WAKE_CAP)

    return enqueue


def sides(url: str, label: str):
    if label == "redisparts":
        return redisparts_side(url)
    if label.startswith("rq"):
        return rq_side(url, forking=label == "rq fork")
    return {"huey": huey_side, "celery": celery_side, "dramatiq": dramatiq_side}.get(
        label, bare_side
    )(url)


def start_and_work(work, jobs: int) -> float:
    """In a worker process: the perf_counter at the worker's start, then run the jobs."""
    started = time.perf_counter()
    work(jobs)
    return started


def enqueue_rates(enqueuers: dict, jobs: dict[str, int], seconds: float = 0.0) -> dict:
    """Enqueue every queue's jobs call by call in turn; return 1 / median time per call.

    Each turn takes the queues in a new random order (seeded: the same in every run): a
    call runs slower after a heavy peer's (its code and data leave the CPU caches), so
    every queue follows every other equally often rather than always the same ones."""
    times: dict[str, list[float]] = {label: [] for label in enqueuers}
    clock = time.perf_counter
    order = list(enqueuers.items())
    shuffle = random.Random(0).shuffle
    for index in range(max(jobs.values())):
        shuffle(order)
        for label, enqueue in order:
            if index < jobs[label]:
                started = clock()
                enqueue(index, seconds)
                times[label].append(clock() - started)
    return {label: 1 / statistics.median(spent) for label, spent in times.items()}


def exactly_once(jobs: int) -> bool:
    return list(TALLY.runs) == [1] * jobs


# -- throughput, one worker and two -------------------------------------------------------------


def measure_round(ctx: Context, jobs: dict[str, int], reverse: bool) -> dict[str, Any]:
    """One round: fill every queue (interleaved), run each queue's worker in turn, then
    enqueue with ours and its floor alone."""
    global TALLY
    ctx.client()  # an emptied server
    made = {label: sides(ctx.url(), label) for label in LABELS}
    enqueuers = {label: side[0] for label, side in made.items()}
    enqueuers["script"] = script_enqueuer(ctx.url())
    enqueue = enqueue_rates(enqueuers, {**jobs, "script": jobs["redisparts"]})
    figures = {}
    for label in reversed(LABELS) if reverse else LABELS:
        TALLY = Tally(jobs[label])
        [started] = run_processes(start_and_work, [(made[label][1], jobs[label])])
        figures[label] = {
            "enqueue": enqueue[label],
            "process": jobs[label] / (max(TALLY.ended) - started),
            "once": exactly_once(jobs[label]),
        }
    # Ours and its floor again, the two alone: among the peers each call follows calls that
    # pushed its code and data out of the CPU caches, which costs the call that touches
    # more of them more; alone, what is left is our code's own cost.
    pair = {label: enqueuers[label] for label in ("redisparts", "script")}
    alone = enqueue_rates(pair, dict.fromkeys(pair, jobs["redisparts"]))
    figures["redisparts"]["enqueue alone"] = alone["redisparts"]
    figures["script"] = {"enqueue": enqueue["script"], "enqueue alone": alone["script"]}
    return figures


def two_workers_round(ctx: Context, jobs: int, reverse: bool) -> dict[str, Any]:
    """Jobs of 1 ms, two worker processes per queue: process rate, first start to last end."""
    global TALLY
    labels = ["redisparts", *PEERS]
    figures = {}
    for label in reversed(labels) if reverse else labels:
        ctx.client()
        enqueue, work = sides(ctx.url(), label)
        for index in range(jobs):
            enqueue(index, 0.001)
        TALLY = Tally(jobs)
        starts = run_processes(start_and_work, [(work, jobs), (work, jobs)])
        figures[label] = {
            "process": jobs / (max(TALLY.ended) - min(starts)),
            "once": exactly_once(jobs),
        }
    return figures


def throughput(ctx: Context) -> list[Section]:
    full = 150 if ctx.quick else 2000
    jobs = {label: min(full, count or full) for label, count in JOBS.items()}
    samples = Samples([measure_round(ctx, jobs, bool(n % 2)) for n in range(ctx.repetitions)])
    two_jobs = 100 if ctx.quick else 600
    pairs = Samples([two_workers_round(ctx, two_jobs, bool(n % 2)) for n in range(ctx.repetitions)])
    best_peer = max(PEERS, key=lambda label: pairs.median(label, "process"))
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
            rows=[
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
            + [
                [
                    SCRIPT_LABEL,
                    jobs["redisparts"],
                    samples.median("script", "enqueue"),
                    samples.spread("script", "enqueue"),
                    "",
                    "",
                    "",
                ]
            ],
            ratios=[
                Ratio(
                    f"redisparts / {LABELS.get(other, SCRIPT_LABEL)}, {figure}",
                    samples.ratio("redisparts", other, figure),
                    target,
                )
                for other, figure, target in TARGETS
            ]
            + [
                Ratio(
                    f"redisparts / {SCRIPT_LABEL}, enqueue, the two alone",
                    samples.ratio("redisparts", "script", "enqueue alone"),
                )
            ],
            checks=[
                Check(
                    f"{LABELS[label]}: every job ran exactly once",
                    all(round_[label]["once"] for round_ in samples.rounds),
                    "counted in shared memory outside Redis, every round",
                )
                for label in LABELS
            ],
            notes=[
                f"median of {ctx.repetitions} rounds; enqueue: the queues take turns call by "
                "call, in a new random order each turn, 1 / median time per call; process: "
                "the workers take turns, from the worker's start to the end of its last job",
                "the two alone: our enqueue and its floor taking turns with no peer between"
                " them, after the workers (the peers' calls leave both with cold caches)",
            ],
        ),
        Section(
            title="Queues: jobs of 1 ms, two worker processes",
            columns=["queue", "jobs/round", "process/s", "range", "redisparts / this"],
            rows=[
                [
                    LABELS[label],
                    two_jobs,
                    pairs.median(label, "process"),
                    pairs.spread(label, "process"),
                    pairs.ratio("redisparts", label, "process"),
                ]
                for label in ["redisparts", *PEERS]
            ],
            ratios=[
                Ratio(
                    f"redisparts / the best peer ({LABELS[best_peer]}), two workers, 1 ms jobs",
                    pairs.ratio("redisparts", best_peer, "process"),
                    1.0,
                )
            ],
            checks=[
                Check(
                    f"{LABELS[label]}: every job ran exactly once",
                    all(round_[label]["once"] for round_ in pairs.rounds),
                    "counted in shared memory outside Redis, every round",
                )
                for label in ["redisparts", *PEERS]
            ],
            notes=["from the first worker's start to the last job's end"],
        ),
    ]


# -- latency ----------------------------------------------------------------------------------


def latency_round(ctx: Context, jobs: int, label: str) -> dict[str, float]:
    """Enqueue-to-start times of ``jobs`` jobs sent at 100/s into a running idle worker."""
    global TALLY
    ctx.client()
    warmup = 5
    TALLY = Tally(warmup + jobs)
    enqueue, work = sides(ctx.url(), label)
    worker = FORK.Process(target=work, args=(warmup + jobs, False), daemon=False)
    worker.start()
    try:
        for index in range(warmup):
            enqueue(index)
        deadline = time.monotonic() + 60
        while TALLY.finished.value < warmup and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # idle again: blocked waiting for work
        sent = []
        tick = time.perf_counter()
        for index in range(warmup, warmup + jobs):
            sent.append(time.perf_counter())
            enqueue(index)
            tick += 0.01
            time.sleep(max(0.0, tick - time.perf_counter()))
        while TALLY.finished.value < warmup + jobs and time.monotonic() < deadline + 60:
            time.sleep(0.01)
    finally:
        worker.join(30)
        if worker.is_alive():
            worker.kill()
            worker.join()
    waits = sorted((TALLY.started[warmup + n] - sent[n]) * 1000 for n in range(jobs))
    return {
        "p50": statistics.median(waits),
        "p99": waits[min(len(waits) - 1, int(len(waits) * 0.99))],
        "once": exactly_once(warmup + jobs),
    }


def latency(ctx: Context) -> list[Section]:
    jobs = 50 if ctx.quick else 300
    labels = ["redisparts", "huey", "celery", "dramatiq"]
    rounds = []
    for n in range(ctx.repetitions):
        order = labels if n % 2 == 0 else list(reversed(labels))
        rounds.append({label: latency_round(ctx, jobs, label) for label in order})
    samples = Samples(rounds)
    ratios = []
    for peer, target in (("huey", 1.0), ("celery", 0.6)):
        for figure in ("p50", "p99"):
            ratios.append(
                Ratio(
                    f"redisparts / {LABELS[peer]}, latency {figure} (lower is better)",
                    samples.ratio("redisparts", peer, figure),
                    target,
                    at_most=True,
                )
            )
    return [
        Section(
            title="Queues: enqueue-to-start latency, 100 jobs/s into an idle worker (ms)",
            columns=["queue", "p50 ms", "range", "p99 ms", "range"],
            rows=[
                [
                    LABELS[label],
                    samples.median(label, "p50"),
                    samples.spread(label, "p50"),
                    samples.median(label, "p99"),
                    samples.spread(label, "p99"),
                ]
                for label in labels
            ],
            ratios=ratios,
            checks=[
                Check(
                    f"{LABELS[label]}: every job ran exactly once",
                    all(round_[label]["once"] for round_ in rounds),
                    "counted in shared memory outside Redis",
                )
                for label in labels
            ],
            notes=[f"{jobs} jobs per round after 5 warm-up jobs; median of {ctx.repetitions}"],
        )
    ]


# -- fairness, duplicates and recovery (redisparts) -------------------------------------------


def fairness_round(ctx: Context, slow: list[int]) -> float:
    """Makespan of 200 jobs on two workers, the ``slow`` ones sleeping 100 ms, over the
    lower bound max(total work / 2, 0.1 s)."""
    global TALLY
    ctx.client()
    enqueue, work = redisparts_side(ctx.url())
    for index in range(200):
        enqueue(index, 0.1 if index in slow else 0.0)
    TALLY = Tally(200)
    run_processes(start_and_work, [(work, 200), (work, 200)])
    makespan = max(TALLY.ended) - min(TALLY.started)
    bound = max(len(slow) * 0.1 / 2, 0.1)
    return makespan / bound


def duplicates_run(ctx: Context, kills: int) -> dict[str, float]:
    """SIGKILL a prefork worker of concurrency 2 ``kills`` times under load; re-runs per kill."""
    global TALLY
    from django.test import override_settings

    ctx.client()
    jobs = 400
    enqueue, _ = redisparts_side(ctx.url())
    for index in range(jobs):
        enqueue(index, 0.005)
    TALLY = Tally(jobs)
    url = ctx.url()

    def serve() -> None:
        Worker(
            [QUEUE], group=GROUP, client=redis.Redis.from_url(url), pool="prefork", concurrency=2
        ).run()

    from django.conf import settings

    faster = {"QUEUE_WORKER_TIMEOUT": 1.0, "QUEUE_MAX_DELIVERIES": 1000}
    with override_settings(REDISPARTS={**settings.REDISPARTS, **faster}):
        for _ in range(kills):
            worker = FORK.Process(target=serve)
            worker.start()
            time.sleep(0.3)
            worker.kill()
            worker.join()
        time.sleep(1.0)
        last = FORK.Process(target=serve)
        last.start()
        deadline = time.monotonic() + 120
        while sum(1 for runs in TALLY.runs if runs) < jobs and time.monotonic() < deadline:
            time.sleep(0.05)
        last.terminate()
        last.join(30)
    runs = list(TALLY.runs)
    return {
        "reruns_per_kill": sum(max(0, count - 1) for count in runs) / kills,
        "lost": runs.count(0),
    }


def recovery_trial(ctx: Context) -> float:
    """Seconds from the SIGKILL of a worker holding a job to the job's start elsewhere."""
    global TALLY
    ctx.client()
    enqueue, _ = redisparts_side(ctx.url())
    enqueue(0, 30.0)
    TALLY = Tally(1)
    url = ctx.url()

    def serve() -> None:
        Worker([QUEUE], group=GROUP, client=redis.Redis.from_url(url)).run()

    holder = FORK.Process(target=serve)
    holder.start()
    while TALLY.starts[0] < 1:
        time.sleep(0.005)
    other = FORK.Process(target=serve)
    other.start()
    time.sleep(0.5)
    killed = time.perf_counter()
    holder.kill()
    holder.join()
    deadline = time.monotonic() + 30
    while TALLY.starts[0] < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    recovered = TALLY.started[0] - killed if TALLY.starts[0] >= 2 else float("inf")
    other.kill()
    other.join()
    return recovered


def robustness(ctx: Context) -> list[Section]:
    every_tenth = list(range(9, 200, 10))
    last_twenty = list(range(180, 200))
    fairness = Samples(
        [
            {
                "every tenth": fairness_round(ctx, every_tenth),
                "last twenty": fairness_round(ctx, last_twenty),
            }
            for _ in range(ctx.repetitions)
        ]
    )
    kills = 5 if ctx.quick else 20
    duplicates = duplicates_run(ctx, kills)
    trials = [recovery_trial(ctx) for _ in range(2 if ctx.quick else 5)]
    recovery = statistics.median(trials)
    return [
        Section(
            title="Queues (redisparts): fairness, duplicates per kill, recovery",
            columns=["measure", "figure", "range", "target"],
            rows=[
                [
                    "makespan / lower bound, slow every tenth",
                    fairness.median("every tenth"),
                    fairness.spread("every tenth"),
                    "<= 1.10",
                ],
                [
                    "makespan / lower bound, slow last twenty",
                    fairness.median("last twenty"),
                    fairness.spread("last twenty"),
                    "<= 1.10",
                ],
                [
                    f"re-runs per SIGKILL (concurrency 2, {kills} kills)",
                    duplicates["reruns_per_kill"],
                    "",
                    "<= 2",
                ],
                ["jobs lost", duplicates["lost"], "", "0"],
                [
                    "seconds from SIGKILL to the job running elsewhere (median)",
                    recovery,
                    f"{min(trials):.2f}..{max(trials):.2f}",
                    "<= 5",
                ],
            ],
            ratios=[],
            checks=[
                Check(
                    "fairness, slow every tenth",
                    fairness.median("every tenth") <= 1.10,
                    "makespan <= 1.10 x max(work / 2, longest job)",
                ),
                Check(
                    "fairness, slow last twenty",
                    fairness.median("last twenty") <= 1.10,
                    "makespan <= 1.10 x max(work / 2, longest job)",
                ),
                Check(
                    "re-runs per kill <= concurrency",
                    duplicates["reruns_per_kill"] <= 2,
                    "counted in shared memory outside Redis",
                ),
                Check("no job lost", duplicates["lost"] == 0, "after the kills"),
                Check(
                    "recovery within 5 s",
                    recovery <= 5.0,
                    "QUEUE_WORKER_TIMEOUT 3 s, default 60 s lease",
                ),
            ],
            notes=["two solo workers, no prefetch; the kills come every 0.3 s"],
        )
    ]


def _section_process(measure, ctx: Context, sender) -> None:
    logging.getLogger("redisparts.tasks").setLevel(logging.ERROR)  # the reaper's notes
    warnings.filterwarnings("ignore", message="You're running the worker with superuser")
    try:
        sender.send(measure(ctx))
    except BaseException as exc:
        sender.send(exc)
        raise


def run(ctx: Context) -> list[Section]:
    """Each part in a process of its own, forked from this one: the peers' clients and
    threads of one part are never inherited by the workers forked for the next."""
    sections: list[Section] = []
    for measure in (throughput, latency, robustness):
        receiver, sender = FORK.Pipe(duplex=False)
        part = FORK.Process(target=_section_process, args=(measure, ctx, sender))
        part.start()
        result = receiver.recv()
        part.join()
        if isinstance(result, BaseException):
            raise result
        sections += result
    return sections


if __name__ == "__main__":
    # Run the functions of bench.queues, not of __main__: the jobs RQ and our worker
    # import by name must see the tally this module sets.
    from bench import queues

    main(queues.run, __doc__.splitlines()[0])
