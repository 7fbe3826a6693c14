"""Tasks registered for the task-queue tests, and helpers to run workers in processes.

Completions are recorded in Redis keys outside the queue's keyspace, so the
tests check the queue's guarantees independently of its own bookkeeping.
"""

import fcntl
import os
import signal
import time

from django.core.mail import send_mail

from redisparts_app.connection import get_redis
from redisparts_app.services.tasks import Scheduler, Worker, task
from tests.processes import CONTEXT

DONE = "test:tasks:done"  # set of labels of finished runs
RUNS = "test:tasks:runs"  # hash label -> number of runs
ORDER = "test:tasks:order"  # list of labels in the order they ran


@task(name="tests.record", queue="default", max_retries=0)
def record(label: str, pause: float = 0.0) -> None:
    if pause:
        time.sleep(pause)
    client = get_redis()
    pipe = client.pipeline()
    pipe.rpush(ORDER, label)
    pipe.hincrby(RUNS, label, 1)
    pipe.sadd(DONE, label)
    pipe.execute()


@task(name="tests.record_high", queue="high", max_retries=0)
def record_high(label: str, pause: float = 0.0) -> None:
    record.func(label, pause)


@task(name="tests.flaky", queue="default", max_retries=2)
def flaky(label: str) -> None:
    get_redis().hincrby(RUNS, label, 1)
    raise RuntimeError(f"flaky {label} failed")


@task(name="tests.fails_until_flag", queue="default", max_retries=0)
def fails_until_flag(label: str) -> None:
    client = get_redis()
    if not client.exists("test:tasks:flag"):
        raise ValueError("flag not set")
    client.sadd(DONE, label)


@task(name="tests.suicide", queue="default", max_retries=5)
def suicide(label: str) -> None:
    get_redis().hincrby(RUNS, label, 1)
    os.kill(os.getpid(), signal.SIGKILL)


@task(name="tests.slow_marked", queue="default", max_retries=0)
def slow_marked(label: str, seconds: float) -> None:
    client = get_redis()
    client.rpush(ORDER, f"start:{label}")
    time.sleep(seconds)
    client.rpush(ORDER, f"finish:{label}")


@task(name="tests.send_sold_email", queue="email", max_retries=3)
def send_sold_email(seller_email: str, item: str, price: int, buyer: str) -> None:
    """The demo's "your item sold" e-mail, sent with Django's e-mail API."""
    send_mail(
        subject=f"Your {item} sold",
        message=f"{buyer} bought your {item} for {price}.",
        from_email="market@example.com",
        recipient_list=[seller_email],
    )


def _run_worker(queues: list[str], lease: float, maintenance: float) -> None:
    Worker(queues, lease=lease, maintenance_interval=maintenance, block=0.2).run()


def start_worker(queues: list[str], lease: float = 1.0, maintenance: float = 0.3):
    """Start a forked worker process running until signalled."""
    process = CONTEXT.Process(target=_run_worker, args=(queues, lease, maintenance), daemon=True)
    process.start()
    return process


def _run_scheduler(max_wait: float) -> None:
    Scheduler(max_wait=max_wait).run()


def start_scheduler(max_wait: float = 1.0):
    """Start a forked scheduler process running until signalled."""
    process = CONTEXT.Process(target=_run_scheduler, args=(max_wait,), daemon=True)
    process.start()
    return process


def stop(process, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int | None:
    """Signal ``process`` and wait for it; kill it if it outlives ``timeout``."""
    if process.is_alive():
        os.kill(process.pid, sig)
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
    return process.exitcode


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


# -- tasks of the runtime tests (test_tasks_runtime.py) ------------------------------------

CONCURRENT = "test:tasks:concurrent"  # counter of tasks running at once
SEEN = "test:tasks:seen"  # list: how many were running together, per task


@task(name="tests.meet", queue="default", max_retries=0)
def meet(label: str, expected: int) -> None:
    """Wait (at most 10 s) until ``expected`` tasks run at once; record how many did."""
    client = get_redis()
    client.incr(CONCURRENT)
    deadline = time.monotonic() + 10
    while int(client.get(CONCURRENT)) < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    client.rpush(SEEN, f"{label}:{int(client.get(CONCURRENT))}")


@task(name="tests.ignores_soft_limit", queue="default", max_retries=0)
def ignores_soft_limit(label: str) -> None:
    """Catch the soft limit and go on in Python, then block in C with SIGALRM blocked."""
    from redisparts_app.exceptions import SoftTimeLimitExceeded

    get_redis().rpush(ORDER, f"start:{label}")
    try:
        time.sleep(1000)
    except SoftTimeLimitExceeded:
        get_redis().rpush(ORDER, f"soft:{label}")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(10**6)


@task(name="tests.sleeps", queue="default", max_retries=0)
def sleeps(label: str, seconds: float) -> None:
    get_redis().rpush(ORDER, f"start:{label}")
    time.sleep(seconds)
    get_redis().rpush(ORDER, f"finish:{label}")


@task(name="tests.async_record", queue="default", max_retries=0)
async def async_record(label: str) -> None:
    import asyncio

    await asyncio.sleep(0.01)
    record.func(f"async:{label}")


@task(name="tests.db_count", queue="default", max_retries=0)
def db_count(label: str) -> None:
    from django.contrib.auth.models import User

    get_redis().rpush(ORDER, f"{label}:{User.objects.count()}")


@task(name="tests.db_break", queue="default", max_retries=0)
def db_break(label: str) -> None:
    """Close the database connection under Django, as a database restart would."""
    from django.db import connection

    connection.ensure_connection()
    connection.connection.close()
    get_redis().rpush(ORDER, label)


def run_worker_forever(queues: list[str], options: dict) -> None:
    Worker(queues, block=0.2, **options).run()


def start_runtime_worker(queues: list[str], **options):
    """Start a forked worker process with Worker ``options``, running until signalled;
    return once it has beaten (its signal handlers are in place)."""
    # Not a daemon: a prefork worker has children of its own.
    process = CONTEXT.Process(target=run_worker_forever, args=(queues, options))
    process.start()
    wait_beating(process)
    return process


def wait_beating(process) -> None:
    """Wait until the worker ``process`` has beaten: its signal handlers are in place, so
    a SIGTERM from now on stops it cleanly rather than killing it."""
    from redisparts_app.services.tasks import TaskQueue

    marker = f"-{process.pid}-"
    assert wait_until(lambda: any(marker in w for w in TaskQueue().workers()), timeout=20)


# -- a task with a concurrency limit (test_tasks_limits.py) --------------------------------


def note_running(path: str, label: str, step: int) -> None:
    """Append ``<start|end>:<label>:<runs at once>`` to the file ``path``, under a file
    lock: a count of the runs at once kept outside Redis."""
    with open(path, "a+") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.seek(0)
        lines = log.read().split()
        running = int(lines[-1].rsplit(":", 1)[1]) if lines else 0
        log.write(f"{'start' if step > 0 else 'end'}:{label}:{running + step}\n")


@task(name="tests.limited", queue="limits", max_retries=0, concurrency=2)
def limited(label: str, path: str, pause: float = 0.0) -> None:
    note_running(path, label, 1)
    time.sleep(pause)
    note_running(path, label, -1)


@task(name="tests.rated", queue="rated", max_retries=0, rate_limit="10/s")
def rated(label: str, path: str) -> None:
    """Append ``<label>:<time it started>`` to the file ``path``."""
    with open(path, "a") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(f"{label}:{time.time()}\n")
