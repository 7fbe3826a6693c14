"""``manage.py demo_recovery``: watch a killed worker's task come back and be delivered once.

Enqueues a slow "your item sold" e-mail, starts a worker process, kills it with SIGKILL
while it is sending, shows the task in flight (also on the admin's in-flight page), waits
for the reaper to put it back when its lease runs out, starts a worker again and checks
that the e-mail went out exactly once.

The task records each attempt and each sent e-mail in
``<prefix>:demo:{recovery}:attempts`` / ``:sent`` (hashes keyed by task id, one day TTL),
so the count does not rely on the queue's own bookkeeping.
"""

import multiprocessing
import os
import signal
import time
import uuid
from typing import Any

from django.core.mail import send_mail
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse
from tqdm import tqdm

from marketplace.mailers import default_mailer
from redisparts_app.connection import get_redis
from redisparts_app.exceptions import RedisPartsError, TaskNotFound
from redisparts_app.keys import make_key
from redisparts_app.services.tasks import TaskQueue, Worker, task

TASK_NAME = "marketplace.demo_slow_sold_email"
RECORD_TTL = 86400
# Workers are forked so they share this process's settings and registered tasks.
CONTEXT = multiprocessing.get_context("fork")


def record_key(role: str) -> str:
    return make_key("demo", "recovery", role)


@task(name=TASK_NAME, queue="demo-recovery", max_retries=0)
def slow_sold_email(token: str, seller_email: str, item: str, price: int, seconds: float) -> None:
    """The sold e-mail over a slow mail server: ``seconds`` of talking, then the send."""
    client = get_redis()
    client.pipeline().hincrby(record_key("attempts"), token, 1).expire(
        record_key("attempts"), RECORD_TTL
    ).execute()
    time.sleep(seconds)
    send_mail(
        subject=f"Your {item} sold",
        message=f"Good news: your {item} sold for {price / 100:.2f}.",
        from_email=None,
        recipient_list=[seller_email],
    )
    client.pipeline().hincrby(record_key("sent"), token, 1).expire(
        record_key("sent"), RECORD_TTL
    ).execute()


def _run_worker(queue: str, group: str, lease: float) -> None:
    Worker([queue], group=group, lease=lease, block=0.2, maintenance_interval=0.5).run(max_tasks=1)


class Command(BaseCommand):
    help = (
        "Demo of crash recovery: enqueue a slow 'item sold' e-mail, start a worker, kill it "
        "with SIGKILL in the middle of sending, show the task in flight, wait for the reaper "
        "to requeue it, restart the worker and check the e-mail was delivered exactly once."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--lease",
            type=float,
            default=10.0,
            help="seconds a worker holds the task before the reaper may take it back "
            "(default 10, so there is time to look at the admin's in-flight page)",
        )
        parser.add_argument(
            "--send-seconds",
            type=float,
            default=6.0,
            help="seconds the slow mail server takes to accept the e-mail (default 6)",
        )
        parser.add_argument(
            "--queue", default="demo-recovery", help="queue name (default demo-recovery)"
        )
        parser.add_argument("--group", help="queue group (default: REDISPARTS['QUEUE_GROUP'])")
        parser.add_argument(
            "--seller-email", default="seller@example.com", help="where the sold e-mail goes"
        )
        parser.add_argument(
            "--timeout", type=float, default=120.0, help="seconds to wait for each step"
        )

    def handle(self, *args, lease, send_seconds, queue, group, seller_email, timeout, **opts):
        for value, what in ((lease, "--lease"), (send_seconds, "--send-seconds")):
            if not 0 < value <= 3600:
                raise CommandError(f"{what} must be more than 0 and at most 3600 seconds")
        if not 0 < timeout <= 86400:
            raise CommandError("--timeout must be more than 0 and at most 86400 seconds")
        self.verbosity = opts["verbosity"]
        try:
            self.queue = TaskQueue(group)
            self.queue.validate(TASK_NAME, [], {}, queue)
        except (RedisPartsError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        self.workers: list[Any] = []
        try:
            self.run(queue, lease, send_seconds, seller_email, timeout)
        except KeyboardInterrupt:
            raise CommandError("interrupted; the task stays in Redis for a worker") from None
        finally:
            for worker in self.workers:
                if worker.is_alive():
                    worker.kill()
                worker.join()

    # -- the story ------------------------------------------------------------------------

    def run(self, queue: str, lease: float, seconds: float, email: str, timeout: float) -> None:
        client = self.queue.client
        token = uuid.uuid4().hex
        self.queue.enqueue(
            TASK_NAME,
            args=[token, email, "Sword of Dawn", 12000, seconds],
            queue=queue,
            max_retries=0,
            on_commit=False,
            task_id=token,
        )
        self.say(f"1. Enqueued the sold e-mail for {email} as task {token} on queue {queue!r}.")

        first = self.start_worker(queue, lease)
        self.say(f"2. Started worker process {first.pid}; it takes the task and starts sending.")
        self.wait(lambda: _count(client, "attempts", token) >= 1, timeout, "the worker to start")
        time.sleep(min(seconds / 2, 0.5))
        if not first.is_alive():
            raise CommandError(
                "the worker finished before it could be killed; raise --send-seconds"
            )
        os.kill(first.pid, signal.SIGKILL)
        first.join()
        self.say(f"3. Killed worker {first.pid} with SIGKILL in the middle of sending.")

        held = [info for info in self.queue.inflight(0, 1000) if info.id == token]
        if not held:
            raise CommandError(f"task {token} is not in flight after the kill")
        info = held[0]
        left = max(0.0, (info.lease_until or 0) - time.time())
        path = reverse("admin:redisparts_tasks") + f"?kind=inflight&group={self.queue.group}"
        self.say(
            f"4. In flight: worker {info.worker}, delivery {info.deliveries}, lease ends in "
            f"{left:.1f} s. The admin shows it at {path}"
        )

        self.say("5. Waiting for the reaper to take it back when the lease runs out...")
        with tqdm(total=round(left, 1), unit="s", disable=None if self.verbosity else True) as bar:
            started = time.monotonic()

            def reaped() -> bool:
                bar.n = min(bar.total, round(time.monotonic() - started, 1))
                bar.refresh()
                self.queue.reap()  # what the scheduler and every worker do on their own
                return token in {task.id for task in self.queue.peek(queue, 0, 100)}

            self.wait(reaped, left + timeout, "the reaper", interval=0.2)
        self.say(f"6. Recovered by the reaper: back at the head of queue {queue!r}.")

        second = self.start_worker(queue, lease)
        self.say(f"7. Restarted the worker as process {second.pid}.")
        self.wait(lambda: not second.is_alive(), seconds + timeout, "the worker to send it")
        sent = _count(client, "sent", token)
        attempts = _count(client, "attempts", token)
        try:
            left_over = self.queue.get(token)
        except TaskNotFound:
            left_over = None
        if left_over is not None:
            raise CommandError(
                f"task {token} is still in Redis after the second worker ran "
                f"({left_over.error or 'no error recorded'}); see the admin's task pages"
            )
        if sent != 1:
            raise CommandError(f"the e-mail was sent {sent} times, expected exactly once")
        self.stdout.write(
            self.style.SUCCESS(
                f"8. Delivered once: 1 e-mail to {email} after {attempts} deliveries "
                f"(mail backend {default_mailer()[0].rsplit('.', 2)[-2]})."
            )
        )

    # -- helpers --------------------------------------------------------------------------

    def start_worker(self, queue: str, lease: float):
        process = CONTEXT.Process(
            target=_run_worker, args=(queue, self.queue.group, lease), daemon=True
        )
        process.start()
        self.workers.append(process)
        return process

    def wait(self, predicate, timeout: float, what: str, interval: float = 0.05) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise CommandError(f"gave up waiting for {what} after {timeout:.0f} s")
            time.sleep(interval)

    def say(self, text: str) -> None:
        if self.verbosity:
            self.stdout.write(text)


def _count(client, role: str, token: str) -> int:
    return int(client.hget(record_key(role), token) or 0)
