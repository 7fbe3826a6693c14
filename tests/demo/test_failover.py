"""Sentinel failover under a queue workload: the master is killed while enqueuers and a
worker run in separate processes; the worker, the scheduler and the site carry on through
the new master by themselves, and the test counts what was lost with and without WAIT on
enqueue."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from django.contrib.auth.models import User
from django.test import override_settings

from redisparts_app.exceptions import TaskNotReplicated
from redisparts_app.services.tasks import TaskQueue
from redisparts_app.testing import SentinelSetup, wait_until
from tests.demo.faults import start_command, stop_command, until_stopped
from tests.fault_tasks import record_run, runs
from tests.processes import CONTEXT, run_in_processes

ENQUEUERS = 2


def enqueue_workload(stop, runs_path: str, name: str, wait_replicas: int) -> dict:
    def attempt(n: int) -> None:
        record_run.enqueue_with(args=[runs_path, f"{name}-{n}"], wait_replicas=wait_replicas)

    done = until_stopped(stop, attempt, refusals=(TaskNotReplicated,))
    done["acknowledged"] = [f"{name}-{n}" for n, _task_id in done["acknowledged"]]
    return done


def queue_is_idle() -> bool:
    counts = TaskQueue().counts()
    return not any(counts["queues"].values()) and counts["inflight"] == counts["delayed"] == 0


def site_status(client) -> int:
    return client.get("/market/").status_code


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.parametrize("wait_replicas", [0, 1], ids=["no-wait", "wait-1-replica"])
def test_failover_under_a_queue_workload(tmp_path, client, wait_replicas, record_property):
    runs_path = str(tmp_path / "runs.txt")
    # Two replicas: after the failover one is left, so WAIT 1 can be met again.
    with SentinelSetup(tmp_path / "sentinel", replicas=2, sentinels=3) as setup:
        connection = {
            "SENTINELS": setup.sentinel_addresses,
            "SERVICE_NAME": setup.service_name,
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 5},
        }
        env = {
            "REDIS_SENTINELS": ",".join(f"{h}:{p}" for h, p in setup.sentinel_addresses),
            "REDIS_SENTINEL_MASTER": setup.service_name,
        }
        log = tmp_path / "commands.log"
        worker = start_command(
            ["rp_worker", "default", "--lease", "5", "--import", "tests.fault_tasks"], env, log
        )
        scheduler = start_command(["rp_scheduler"], env, log)
        stop = CONTEXT.Event()
        settings = {"CONNECTIONS": {"default": connection}, "QUEUE_WAIT_REPLICAS": wait_replicas}
        try:
            with override_settings(REDISPARTS=settings), ThreadPoolExecutor(1) as pool:
                client.force_login(User.objects.create_user("alice"))
                assert site_status(client) == 200
                args = [(stop, runs_path, f"e{i}", wait_replicas) for i in range(ENQUEUERS)]
                enqueuers = pool.submit(run_in_processes, enqueue_workload, args, 600)
                wait_until(lambda: len(runs(runs_path)) >= 300, 120, "300 tasks run")

                old = (setup.master.host, setup.master.port)
                setup.master.kill()
                ran_at_kill = len(runs(runs_path))
                sentinel = setup.sentinel(socket_timeout=2)
                wait_until(
                    lambda: _master(sentinel, setup.service_name) not in (None, old),
                    120,
                    "the sentinels promoting a replica",
                )
                # Nobody restarts anything: the worker runs new tasks through the new master,
                # and the site serves pages again.
                wait_until(
                    lambda: len(runs(runs_path)) >= ran_at_kill + 300, 180, "300 more tasks run"
                )
                wait_until(lambda: site_status(client) == 200, 60, "the site answering 200")
                stop.set()
                results = enqueuers.result(timeout=120)
                wait_until(queue_is_idle, 180, "the queue drained")
                assert worker.poll() is None
                assert scheduler.poll() is None
        finally:
            stop.set()
            worker_status = stop_command(worker)
            scheduler_status = stop_command(scheduler)
        assert (worker_status, scheduler_status) == (0, 0), log.read_text()

    acknowledged = {token for result in results for token in result["acknowledged"]}
    ran = runs(runs_path)
    lost = acknowledged - set(ran)
    report = {
        "wait_replicas": wait_replicas,
        "acknowledged": len(acknowledged),
        "not_acknowledged": sum(result["failed"] for result in results),
        "ran": len(set(ran)),
        "ran_twice_or_more": len(ran) - len(set(ran)),
        "lost": len(lost),
    }
    record_property("failover", report)
    print("failover:", json.dumps(report))
    assert "Redis unreachable" in log.read_text()  # the worker met the failover and said so
    if wait_replicas:
        assert lost == set(), f"acknowledged tasks lost despite WAIT: {sorted(lost)[:10]}"


def _master(sentinel, service_name: str):
    try:
        return sentinel.discover_master(service_name)
    except redis.RedisError:  # no sentinel has an answer yet
        return None
