"""Health checks (django-health-check) and Prometheus metrics, on the real test Redis.

Every unhealthy state is made through the services: a worker's claim left unacknowledged
past its lease, a task left waiting in its queue, a lock whose owner key lost its TTL, a
replica stopped with SIGSTOP. Metrics are parsed with prometheus_client's own parser and
compared with the state the test made.
"""

import os
import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.core.checks import run_checks
from django.test import override_settings
from health_check.exceptions import ServiceUnavailable
from prometheus_client.parser import text_string_to_metric_families

from redisparts_app.monitoring.health import (
    ExpiredLeases,
    LocksWithoutTTL,
    MemoryNearLimit,
    QueueBacklog,
    RedisReachable,
    ReplicationLag,
)
from redisparts_app.services import chat, config, counters, figures
from redisparts_app.services.locks import Lock, lock_keys
from redisparts_app.services.semaphores import FairSemaphore, Semaphore
from redisparts_app.services.tasks import Scheduler, TaskQueue, Worker, enqueue
from redisparts_app.testing import free_port, start_replica, wait_until
from tests.tasks_helpers import fails_until_flag

pytestmark = [pytest.mark.django_db, pytest.mark.cluster]

TOKEN = "s3cret-token-for-the-scraper"
DEAD = {"default": {"URL": f"redis://127.0.0.1:{free_port()}/0"}}


def failure(check) -> str:
    """Run a check that must fail; return its message."""
    with pytest.raises(ServiceUnavailable) as raised:
        check.run()
    return raised.value.message


def metrics(client, **headers) -> dict[tuple[str, tuple], float]:
    """Scrape /metrics; return {(sample name, sorted labels): value}."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    text = response.content.decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture
def staff(client):
    """A client signed in as staff with the admin's view permission."""
    user = User.objects.create_user("ops", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_redisparts"))
    client.force_login(user)
    return client


# -- the checks -----------------------------------------------------------------------


@override_settings(REDISPARTS={"HEALTH_QUEUE_MAX_AGE": 0.5})
def test_backlog_check_fails_once_the_next_task_waited_too_long():
    enqueue("tests.record", args=["late"], queue="email", on_commit=False)
    QueueBacklog().run()  # just enqueued
    time.sleep(0.6)
    message = failure(QueueBacklog())
    assert "queue 'email' of group 'default'" in message
    assert "limit 0.5s, 1 ready" in message
    assert Worker(["email"]).run(burst=True, max_tasks=1) == 1  # taken (it fails: unknown)
    QueueBacklog().run()


@override_settings(REDISPARTS={"HEALTH_QUEUE_MAX_AGE": 1.0})
def test_backlog_of_a_delayed_task_counts_from_its_due_time():
    enqueue("tests.record", args=["later"], delay=1.5, on_commit=False)
    time.sleep(1.6)
    Scheduler(reap=False).run(burst=True)
    [group] = figures.queue_figures(groups=["default"])
    [queue] = group.queues
    assert queue.ready == 1
    # Enqueued 1.6 s ago, but ready for about 0.1 s: within the 1 s limit.
    assert 0 <= queue.oldest_age < 1.0
    QueueBacklog().run()


@override_settings(REDISPARTS={"QUEUE_RETRY_DELAY": 1.0})
def test_backlog_of_a_retry_counts_from_the_end_of_its_back_off():
    enqueued = time.time()
    enqueue("tests.fails_until_flag", args=["again"], max_retries=1, on_commit=False)
    assert Worker(["default"]).run(burst=True) == 1  # raised: retried in 1 s
    time.sleep(1.3)
    Scheduler(reap=False).run(burst=True)
    [group] = figures.queue_figures(groups=["default"])
    assert group.queues[0].ready == 1
    # The back-off ended at least 1 s after the enqueue: counted from the enqueue, the age
    # would be a second more than this bound, however slow the machine.
    assert 0 <= group.queues[0].oldest_age <= time.time() - enqueued - 1.0 + 0.05


@override_settings(REDISPARTS={"HEALTH_LEASE_GRACE": 0.2})
def test_expired_lease_check_fails_for_an_unacknowledged_claim_until_it_is_reaped():
    task_id = enqueue("tests.record", args=["claimed"], on_commit=False)
    queue = TaskQueue()
    record, _deliveries = queue.dequeue(["default"], "worker-that-dies", lease=0.3)
    assert record["id"] == task_id
    ExpiredLeases().run()  # the lease still runs
    time.sleep(0.7)
    [group] = figures.queue_figures(groups=["default"])
    assert (group.inflight, group.expired) == (1, 1)
    assert group.most_overdue >= 0.3
    message = failure(ExpiredLeases())
    assert "group 'default': 1 in-flight task(s) past their lease" in message
    assert "rp_scheduler" in message
    assert queue.reap() == (1, 0, None)
    ExpiredLeases().run()


def test_lock_without_ttl_fails_the_lock_check():
    held = Lock("export", ttl=30)
    held.acquire()
    other = Lock("import", ttl=30)
    other.acquire()
    LocksWithoutTTL().run()
    assert figures.lock_figures() == figures.LockFigures(held=2, without_ttl=[])
    # Code outside services.locks making the owner key permanent (PERSIST).
    assert held.client.persist(lock_keys("export")[0])
    message = failure(LocksWithoutTTL())
    assert "1 lock(s) without a TTL" in message
    assert "'export'" in message
    assert "'import'" not in message
    held.release()
    LocksWithoutTTL().run()


@pytest.mark.single_server
def test_unreachable_connection_fails_its_check_with_the_reason():
    connections = {
        "default": {"CACHE": "default"},
        "dead": {**DEAD["default"], "OPTIONS": {"socket_connect_timeout": 1}},
    }
    with override_settings(REDISPARTS={"CONNECTIONS": connections}):
        RedisReachable(alias="default").run()
        assert "Redis connection 'dead' is unreachable" in failure(RedisReachable(alias="dead"))
        assert "unreachable" in failure(QueueBacklog(connection="dead"))
        assert "no Redis connection 'nope'" in failure(RedisReachable(alias="nope"))


@pytest.mark.single_server
@pytest.mark.slow
def test_replication_check_fails_while_a_replica_is_stopped(redis_server_factory, tmp_path):
    master = redis_server_factory(unix_socket=False)
    replica = start_replica(master, tmp_path / "replica")
    try:
        settings = {
            "CONNECTIONS": {"default": {"CACHE": "default"}, "primary": master.url},
            "HEALTH_REPLICATION_MAX_LAG": 1,
        }
        with override_settings(REDISPARTS=settings):
            check = ReplicationLag(connection="primary")
            writer = master.client()

            def lagging() -> bool:
                writer.incr("ticks")
                try:
                    check.run()
                except ServiceUnavailable:
                    return True
                return False

            # A replica acknowledges once a second: on a loaded machine an acknowledgement
            # can come late, so the check is given time to pass first.
            wait_until(lambda: not lagging(), 15, "the replication check to pass")
            os.kill(replica.pid, signal.SIGSTOP)
            wait_until(lagging, 15, "the replication check to fail")
            message = failure(check)
            assert f"replica 127.0.0.1:{replica.port} last acknowledged" in message
            assert "(limit 1s)" in message
            by_bytes = {"HEALTH_REPLICATION_MAX_LAG": 3600, "HEALTH_REPLICATION_MAX_LAG_BYTES": 0}
            with override_settings(REDISPARTS={**settings, **by_bytes}):
                assert "bytes behind its master (limit 0)" in failure(check)
            os.kill(replica.pid, signal.SIGCONT)
            wait_until(lambda: not lagging(), 15, "the replication check to pass again")
    finally:
        os.kill(replica.pid, signal.SIGCONT)
        replica.stop()


@pytest.mark.single_server
def test_memory_check_fails_near_maxmemory_and_ignores_a_server_without_one(
    redis_server_factory,
):
    server = redis_server_factory(args=["--maxmemory-policy", "noeviction"])
    settings = {"CONNECTIONS": {"default": {"CACHE": "default"}, "small": server.url}}
    with override_settings(REDISPARTS=settings), server.client() as client:
        check = MemoryNearLimit(connection="small")
        client.set("ballast", "x" * 1_000_000)
        check.run()  # no maxmemory: nothing to be near
        used = client.info("memory")["used_memory"]
        client.config_set("maxmemory", str(used * 3))
        check.run()  # a third used
        client.config_set("maxmemory", str(int(used / 0.95)))
        message = failure(check)
        assert "of maxmemory in use" in message
        assert "limit 90%" in message
        [found] = figures.memory_figures(client=client)
        assert found.node is None
        assert found.used > 0.9 * found.maxmemory
        client.delete("ballast")  # frees a megabyte
        check.run()


def test_memory_figures_cover_every_node(redis_backend):
    found = figures.memory_figures()
    assert len(found) == (6 if redis_backend == "cluster" else 1)
    assert all(figure.used > 0 for figure in found)
    MemoryNearLimit().run()


def test_replica_lags_cover_every_node(redis_backend):
    lags = figures.replica_lags()
    if redis_backend == "cluster":
        # 3 masters with a replica each; the replicas' own statuses list none.
        assert len(lags) == 3
        assert len({lag.node for lag in lags}) == 3
        assert all(lag.state == "online" for lag in lags)
    else:
        assert lags == []
    ReplicationLag().run()


# -- the endpoints --------------------------------------------------------------------


def test_health_page_answers_200_when_healthy_and_500_with_the_reason(staff):
    enqueue("tests.record", args=["waiting"], on_commit=False)
    response = staff.get("/health/?format=json")
    assert response.status_code == 200
    results = response.json()
    assert set(results.values()) == {"OK"}
    assert "RedisReachable(alias='default')" in results
    assert "QueueBacklog" in results
    assert staff.get("/health/").status_code == 200  # the HTML page renders
    with override_settings(REDISPARTS={"HEALTH_QUEUE_MAX_AGE": 0}):
        time.sleep(0.01)
        response = staff.get("/health/?format=json")
    assert response.status_code == 500
    message = response.json()["QueueBacklog"]
    assert message.startswith("Unavailable: queue 'default' of group 'default'")


def test_metrics_report_the_state_made_through_the_services(staff, redis_backend):
    # Queues: 2 ready in "default", 1 in "email", 1 delayed, 1 failed, 1 claimed and expired.
    failed_id = fails_until_flag.enqueue_with(args=["boom"], on_commit=False)
    assert Worker(["default"]).run(burst=True) == 1
    assert TaskQueue().get(failed_id).error is not None
    for label in ("a", "b", "claimed"):
        enqueue("tests.record", args=[label], on_commit=False)
    enqueue("tests.record", args=["mail"], queue="email", on_commit=False)
    enqueue("tests.record", args=["later"], delay=3600, on_commit=False)
    TaskQueue().dequeue(["default"], "worker-that-dies", lease=0.001)
    # Locks: two held, one made permanent.
    Lock("a", ttl=30).acquire()
    permanent = Lock("b", ttl=30)
    permanent.acquire()
    permanent.client.persist(lock_keys("b")[0])
    # Semaphores: 2 of 3 permits of one, 1 of 5 of a fair one.
    reports = Semaphore("reports", 3, timeout=30)
    assert reports.acquire()
    assert reports.acquire()
    assert FairSemaphore("exports", 5, timeout=30).acquire()
    # Chats: two chats holding 3 messages until bob and cy fetch theirs.
    first = chat.create_chat("ann", ["bob"], "hello")
    chat.send_message(first, "bob", "hi ann")
    chat.create_chat("ann", ["cy"], "hey cy")
    # Counters: 7 hits in the last complete minute, 2 in the current one, 3 s ago, so
    # their second is past the last complete one whenever the scrape comes.
    if not 4 <= time.time() % 60 <= 50:  # room for a slow test within this minute
        time.sleep((64 - time.time() % 60) % 60)
    now = time.time()
    counters.update_counter("hits", 7, clock=lambda: now - 60)
    counters.update_counter("hits", 2, clock=lambda: now - 3)

    found = metrics(staff)

    def value(name, **labels):
        return found[(name, tuple(sorted(labels.items())))]

    assert value("redisparts_redis_up", connection="default") == 1
    assert value("redisparts_queue_ready_tasks", group="default", queue="default") == 2
    assert value("redisparts_queue_ready_tasks", group="default", queue="email") == 1
    assert value("redisparts_queue_oldest_ready_age_seconds", group="default", queue="email") > 0
    assert value("redisparts_queue_delayed_tasks", group="default") == 1
    assert value("redisparts_queue_inflight_tasks", group="default") == 1
    assert value("redisparts_queue_expired_lease_tasks", group="default") == 1
    assert value("redisparts_queue_failed_tasks", group="default") == 1
    assert value("redisparts_queue_quarantined_tasks", group="default") == 0
    assert value("redisparts_locks_held") == 2
    assert value("redisparts_locks_without_ttl") == 1
    assert value("redisparts_semaphore_holders", semaphore="reports") == 2
    assert value("redisparts_semaphore_limit", semaphore="reports") == 3
    assert value("redisparts_semaphore_holders", semaphore="exports") == 1
    assert value("redisparts_semaphore_limit", semaphore="exports") == 5
    assert value("redisparts_chats") == 2
    assert value("redisparts_chat_messages") == 3
    assert value("redisparts_counter_events", counter="hits", precision_seconds="60") == 7
    assert value("redisparts_counter_events", counter="hits", precision_seconds="1") == 0
    replicas = [key for key in found if key[0] == "redisparts_replica_lag_bytes"]
    assert len(replicas) == (3 if redis_backend == "cluster" else 0)

    chat.fetch_pending_messages("bob")
    chat.fetch_pending_messages("ann")
    # The next send deletes what every member fetched: cy's and the new one are held.
    chat.send_message(first, "ann", "bye")
    assert metrics(staff)[("redisparts_chat_messages", ())] == 2


def test_metrics_in_openmetrics_when_the_scraper_asks(staff):
    response = staff.get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().rstrip().endswith("# EOF")


@pytest.mark.single_server
def test_metrics_with_redis_down_report_it_and_still_answer_200(staff):
    with override_settings(REDISPARTS={"CONNECTIONS": DEAD}):
        found = metrics(staff)
    assert found == {("redisparts_redis_up", (("connection", "default"),)): 0}


# -- who may read them ----------------------------------------------------------------


@pytest.mark.parametrize("path", ["/metrics", "/health/"])
def test_anonymous_and_non_staff_users_get_403(client, path):
    assert client.get(path).status_code == 403
    client.force_login(User.objects.create_user("ann", password="x"))
    assert client.get(path).status_code == 403
    # Staff without the admin's view permission see no Redis data in the admin either.
    client.force_login(User.objects.create_user("bob", password="x", is_staff=True))
    response = client.get(path)
    assert response.status_code == 403
    assert "METRICS_TOKEN" in response.content.decode()


@pytest.mark.parametrize("path", ["/metrics", "/health/"])
def test_a_browser_gets_the_projects_403_page_and_a_scraper_a_line(client, path):
    page = client.get(path, headers={"Accept": "text/html,*/*;q=0.8"})
    assert page.status_code == 403
    assert page["Content-Type"].startswith("text/html")
    assert "METRICS_TOKEN" not in page.content.decode()  # for people, not scrapers
    for accept in ("text/plain;version=0.0.4", "*/*"):
        line = client.get(path, headers={"Accept": accept})
        assert line.status_code == 403
        assert line["Content-Type"] == "text/plain; charset=utf-8"
        assert "METRICS_TOKEN" in line.content.decode()


@pytest.mark.parametrize("path", ["/metrics", "/health/?format=json"])
def test_staff_with_the_permission_and_superusers_get_in(staff, admin_client, path):
    assert staff.get(path).status_code == 200
    assert admin_client.get(path).status_code == 200


@pytest.mark.parametrize("path", ["/metrics", "/health/?format=json"])
def test_bearer_token_opens_the_endpoints_only_when_it_matches(client, path):
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    assert client.get(path, **bearer).status_code == 403  # no token configured
    with override_settings(REDISPARTS={"METRICS_TOKEN": TOKEN}):
        assert client.get(path, **bearer).status_code == 200
        assert client.get(path, HTTP_AUTHORIZATION=f"bearer  {TOKEN}").status_code == 200
        assert client.get(path, HTTP_AUTHORIZATION=f"Bearer {TOKEN}x").status_code == 403
        assert client.get(path, HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 403
        assert client.get(path, HTTP_AUTHORIZATION="Bearer ").status_code == 403
        assert client.get(path).status_code == 403


@pytest.mark.single_server
def test_a_scraper_still_gets_in_during_maintenance(client):
    config.set_maintenance(message="upgrading")
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    with override_settings(REDISPARTS={**settings.REDISPARTS, "METRICS_TOKEN": TOKEN}):
        assert client.get("/market/").status_code == 503
        assert client.get("/metrics", **bearer).status_code == 200
        assert client.get("/health/?format=json", **bearer).status_code == 200


def test_metrics_accept_get_only(staff):
    assert staff.post("/metrics").status_code == 405


# -- settings and packaging -----------------------------------------------------------


@pytest.mark.single_server
@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("METRICS_TOKEN", "short"),
        ("METRICS_TOKEN", 1234567890123456789),
        ("HEALTH_QUEUE_MAX_AGE", -1),
        ("HEALTH_LEASE_GRACE", "30"),
        ("HEALTH_REPLICATION_MAX_LAG_BYTES", float("nan")),
        ("HEALTH_MEMORY_MAX_SHARE", 0),
        ("HEALTH_MEMORY_MAX_SHARE", 1.5),
    ],
)
def test_bad_monitoring_settings_are_system_check_errors(setting, value):
    with override_settings(REDISPARTS={setting: value}):
        errors = [e for e in run_checks(tags=["redisparts"]) if e.id == "redisparts.E001"]
    assert len(errors) == 1
    assert setting in errors[0].msg


@pytest.mark.single_server
def test_the_app_works_without_the_monitoring_packages():
    """Without django-health-check and prometheus_client the app loads; only the
    monitoring modules refuse, saying what to install."""
    script = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("health_check", "prometheus_client"):
            raise ImportError(f"No module named {name!r}")
sys.meta_path.insert(0, Block())
import django
from django.conf import settings
settings.configure(
    INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                    "django.contrib.sessions", "django.contrib.messages", "redisparts_app"],
    CACHES={"default": {"BACKEND": "django_redis.cache.RedisCache",
                        "LOCATION": "redis://127.0.0.1:1/0"}},
)
django.setup()
import redisparts_app.admin, redisparts_app.services.figures
for module in ("redisparts_app.monitoring.health", "redisparts_app.monitoring.metrics"):
    try:
        __import__(module)
    except Exception as exc:
        print(type(exc).__name__, exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ImproperlyConfigured redisparts_app.monitoring.health needs django-health-check: "
        "pip install 'redisparts[monitoring]'",
        "ImproperlyConfigured redisparts_app.monitoring.metrics needs prometheus_client: "
        "pip install 'redisparts[monitoring]'",
    ]
