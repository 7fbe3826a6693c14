import logging

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.utils.log import configure_logging

from redisparts_app.exceptions import InvalidArgument
from redisparts_app.keys import make_key, scan_keys, slot_of
from redisparts_app.services import logs
from redisparts_app.services.logs import RedisLogHandler, common, log_common, recent
from tests.processes import run_in_processes

pytestmark = pytest.mark.cluster

H = 1_800_000_000 - 1_800_000_000 % 3600  # the start of some hour (epoch seconds)


def at(seconds: float):
    return lambda: seconds


def test_recent_log_keeps_the_newest_100_newest_first(redis_client, face):
    lg = face(logs)
    for i in range(130):
        lg.log_recent("app", f"message {i}", "info", clock=at(H + i))
    entries = lg.recent("app", "info")
    assert len(entries) == 100
    assert [e.message for e in entries] == [f"message {i}" for i in range(129, 29, -1)]
    assert entries[0].time == H + 129
    assert [e.message for e in lg.recent("app", logging.INFO, limit=3)] == [
        "message 129",
        "message 128",
        "message 127",
    ]
    assert lg.recent("app", "warning") == []


@override_settings(REDISPARTS={"LOG_RECENT_LIMIT": 5})
def test_recent_limit_is_a_setting(redis_client, face):
    lg = face(logs)
    for i in range(8):
        lg.log_common("app", f"m{i}", logging.ERROR)
    assert [e.message for e in lg.recent("app", "error")] == ["m7", "m6", "m5", "m4", "m3"]


def test_severities_are_normalized():
    assert logs.normalize_severity(logging.WARNING) == "warning"
    assert logs.normalize_severity(25) == "info"
    assert logs.normalize_severity(5) == "debug"
    assert logs.normalize_severity(" WARN ") == "warning"
    assert logs.normalize_severity("fatal") == "critical"
    for bad in ("loud", "", True, None, 1.5):
        with pytest.raises(InvalidArgument, match="severity"):
            logs.normalize_severity(bad)


def test_common_log_counts_messages_most_common_first(redis_client, face):
    lg = face(logs)
    for message in ["disk full", "login", "disk full", "disk full", "login", "boot"]:
        lg.log_common("app", message, "warning", clock=at(H + 10))
    assert lg.common("app", "warning", clock=at(H + 20)) == [
        ("disk full", 3),
        ("login", 2),
        ("boot", 1),
    ]
    assert lg.common("app", "warning", limit=1, clock=at(H + 20)) == [("disk full", 3)]
    # log_common also feeds the recent log
    assert [e.message for e in lg.recent("app", "warning", limit=2)] == ["boot", "login"]


def test_common_log_rotates_at_the_hour_and_keeps_the_previous_hour(redis_client, face):
    lg = face(logs)
    for message in ["a", "a", "a", "b"]:
        lg.log_common("app", message, clock=at(H + 3599))
    lg.log_common("app", "c", clock=at(H + 3600))  # first entry of the next hour rotates
    assert lg.common("app", clock=at(H + 3700)) == [("c", 1)]
    assert lg.common("app", previous=True, clock=at(H + 3700)) == [("a", 3), ("b", 1)]
    key = make_key("log", "app", "common", "info")
    assert redis_client.zscore(f"{key}:last", "a") == 3
    assert int(redis_client.get(f"{key}:pstart")) == H

    lg.log_common("app", "d", clock=at(H + 7200 + 1))
    assert lg.common("app", clock=at(H + 7201)) == [("d", 1)]
    assert lg.common("app", previous=True, clock=at(H + 7201)) == [("c", 1)]


def test_quiet_hours_read_as_empty_without_a_write(redis_client, face):
    lg = face(logs)
    lg.log_common("app", "a", clock=at(H + 5))
    assert lg.common("app", clock=at(H + 3600 + 5)) == []
    assert lg.common("app", previous=True, clock=at(H + 3600 + 5)) == [("a", 1)]
    assert lg.common("app", previous=True, clock=at(H + 7200 + 5)) == []
    # a write after a silent hour leaves an empty previous hour, not a stale one
    lg.log_common("app", "b", clock=at(H + 7200 + 5))
    assert lg.common("app", previous=True, clock=at(H + 7200 + 5)) == []
    assert lg.common("app", clock=at(H + 7200 + 5)) == [("b", 1)]


def test_common_log_keys_expire_and_share_one_slot(redis_client, face):
    lg = face(logs)
    lg.log_common("app", "a", clock=at(H))
    lg.log_common("app", "a", clock=at(H + 3600))
    names = [k.decode() for k in scan_keys(redis_client, "rp:log:*")]
    assert len(names) == 5
    assert len({slot_of(k) for k in names}) == 1
    assert all(redis_client.ttl(k) > 0 for k in names)


def _log_across_the_hour(worker: int, per_worker: int) -> int:
    for i in range(per_worker):
        now = H + 3599 if i < per_worker // 2 else H + 3600
        log_common("app", f"w{worker % 3}", clock=at(now))
    return per_worker


@pytest.mark.slow
def test_concurrent_writers_crossing_the_hour_lose_no_message(redis_client):
    written = run_in_processes(_log_across_the_hour, [(w, 300) for w in range(4)])
    now = H + 3600
    counted = common("app", clock=at(now)) + common("app", previous=True, clock=at(now))
    assert sum(count for _message, count in counted) == sum(written)
    assert common("app", clock=at(now)) != []
    assert common("app", previous=True, clock=at(now)) != []


def test_long_messages_are_cut_and_bad_input_writes_nothing(redis_client, face):
    lg = face(logs)
    with override_settings(REDISPARTS={"LOG_MAX_MESSAGE_LENGTH": 50}):
        lg.log_recent("app", "x" * 500)
        (entry,) = lg.recent("app")
    assert len(entry.message) == 50
    assert entry.message.endswith("…")
    redis_client.flushdb()
    for name in ["", "a:b", "a{b}", "a*", "x" * 500, None]:
        with pytest.raises(InvalidArgument):
            lg.log_common(name, "message")
    with pytest.raises(InvalidArgument, match="invalid message: must be a string"):
        lg.log_common("app", b"bytes")
    with pytest.raises(InvalidArgument, match="severity"):
        lg.log_recent("app", "message", "loud")
    with pytest.raises(InvalidArgument, match="limit"):
        lg.recent("app", limit=0)
    misconfigured = override_settings(REDISPARTS={"LOG_RECENT_LIMIT": 0})
    with misconfigured, pytest.raises(ImproperlyConfigured, match="LOG_RECENT_LIMIT"):
        lg.log_common("app", "message")
    assert redis_client.dbsize() == 0


def test_unicode_messages_round_trip(redis_client, face):
    lg = face(logs)
    lg.log_common("日志", "用户 235 登录 ✓", "info", clock=at(H))
    assert lg.recent("日志")[0].message == "用户 235 登录 ✓"
    assert lg.common("日志", clock=at(H)) == [("用户 235 登录 ✓", 1)]


@pytest.fixture
def test_logger():
    logger = logging.getLogger("rp.tests.logs")
    yield logger
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


def test_handler_through_django_logging(redis_client, test_logger):
    configure_logging(
        "logging.config.dictConfig",
        {
            "version": 1,
            "disable_existing_loggers": False,
            "handlers": {
                "redis": {
                    "class": "redisparts_app.services.logs.RedisLogHandler",
                    "name": "shop",
                    "level": "INFO",
                }
            },
            "loggers": {"rp.tests.logs": {"handlers": ["redis"], "level": "DEBUG"}},
        },
    )
    test_logger.debug("below the handler's level")
    test_logger.info("user %s logged in", 235)
    test_logger.warning("disk almost full")
    test_logger.warning("disk almost full")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        test_logger.exception("checkout failed")

    assert [e.message for e in recent("shop", "info")] == ["user 235 logged in"]
    assert common("shop", "warning") == [("disk almost full", 2)]
    (error,) = recent("shop", "error")
    assert error.message.startswith("checkout failed\nTraceback")
    assert "RuntimeError: boom" in error.message
    assert recent("shop", "debug") == []


def test_handler_with_redis_down_does_not_raise_into_the_caller(
    redis_client, test_logger, tmp_path, capsys
):
    test_logger.addHandler(RedisLogHandler(name="shop"))
    test_logger.propagate = False
    try:
        with override_settings(
            REDISPARTS={"CONNECTIONS": {"default": f"unix://{tmp_path}/no.sock"}}
        ):
            test_logger.error("while Redis is down")
    finally:
        test_logger.propagate = True
    assert "ConnectionError" in capsys.readouterr().err  # reported by Handler.handleError
    test_logger.error("after the outage")
    assert [e.message for e in recent("shop", "error")] == ["after the outage"]


class LoggingRedis(redis.Redis):
    """A real client that logs every command, as redis-py's own logging would."""

    def execute_command(self, *args, **options):
        logging.getLogger("redis.tests").warning("command %s", args[0])
        return super().execute_command(*args, **options)


@pytest.mark.single_server  # a client of redis_url
def test_handler_does_not_recurse_when_redis_py_logs(redis_client, redis_url):
    handler = RedisLogHandler(name="shop", client=LoggingRedis.from_url(redis_url))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        logging.getLogger("rp.tests.logs").warning("one record")
    finally:
        root.removeHandler(handler)
    # the records logged by the client inside emit() were dropped, not written
    assert [e.message for e in recent("shop", "warning")] == ["one record"]


def test_handler_refuses_a_bad_log_name():
    with pytest.raises(InvalidArgument, match="log name"):
        RedisLogHandler(name="bad:name")
