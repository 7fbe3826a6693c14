import json
import math
import os
import signal
import time

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from redisparts_app import keys
from redisparts_app.connection import get_redis, slot_client
from redisparts_app.exceptions import (
    InvalidArgument,
    LockNotOwned,
    LockTimeout,
    RedisPartsError,
)
from redisparts_app.services.lease import BACKOFF_LONGEST
from redisparts_app.services.locks import (
    HeldLock,
    Lock,
    fenced_update,
    force_release,
    held_locks,
    lock_keys,
)
from tests.counting import CountingRedis, counting_like
from tests.fencing.models import FencedRecord
from tests.processes import CONTEXT, run_in_processes

pytestmark = pytest.mark.cluster

READY = "test:locks:ready"
RESUME = "test:locks:resume"
RESULT = "test:locks:result"


@pytest.fixture
def new_lock(face):
    """Build a Lock seen through the test's face (``lock.acquire()`` or ``lock.aacquire()``)."""
    return lambda *args, **kwargs: face(Lock(*args, **kwargs))


# -- validation --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "a:b", "{x}", "rep*", "x" * 201, "tab\there", " lead"])
def test_bad_lock_names_are_refused_before_any_redis_call(redis_url, name):
    counting = CountingRedis.from_url(redis_url)
    with pytest.raises(InvalidArgument):
        Lock(name, ttl=1, timeout=1, client=counting)
    assert counting.commands == []


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "5", True, 0.0001])
@pytest.mark.parametrize("what", ["ttl", "timeout"])
def test_bad_ttl_and_timeout_are_refused_before_any_redis_call(redis_url, what, bad):
    counting = CountingRedis.from_url(redis_url)
    arguments = {"ttl": 1, "timeout": 1, what: bad}
    with pytest.raises(InvalidArgument) as caught:
        Lock("reports", client=counting, **arguments)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, RedisPartsError)
    assert what in str(caught.value)
    assert counting.commands == []


def test_a_pipeline_is_refused_as_client(redis_client):
    with pytest.raises(TypeError, match="not a pipeline"):
        Lock("reports", ttl=1, timeout=1, client=redis_client.pipeline())


def test_arguments_equal_to_remembered_ones_are_checked_by_their_type(redis_url):
    counting = CountingRedis.from_url(redis_url)
    Lock("reports", ttl=1, timeout=1, client=counting)  # remembered: 1 == True == 1.0
    for arguments in ({"ttl": True, "timeout": 1}, {"ttl": 1, "timeout": True}):
        with pytest.raises(InvalidArgument, match="got bool"):
            Lock("reports", client=counting, **arguments)
    assert Lock("reports", ttl=1.0, timeout=1.0, client=counting).ttl == 1.0
    # Unhashable arguments cannot be looked up; they are checked, and refused.
    for name, ttl in ((["reports"], 1), ("reports", [1])):
        with pytest.raises(InvalidArgument):
            Lock(name, ttl=ttl, timeout=1, client=counting)
    assert counting.commands == []


def test_defaults_come_from_settings(settings):
    settings.REDISPARTS = {**settings.REDISPARTS, "LOCK_TTL": 3.5, "LOCK_TIMEOUT": 1.5}
    lock = Lock("reports")
    assert (lock.ttl, lock.timeout) == (3.5, 1.5)


def test_lock_keys_share_one_cluster_slot():
    owner, fence, signal_key = lock_keys("报表-2024")
    assert owner.endswith(":lock:{报表-2024}:owner")
    assert keys.slot_of(owner) == keys.slot_of(fence) == keys.slot_of(signal_key)


def test_a_lock_name_is_checked_and_keyed_afresh_after_the_settings_change(settings):
    assert Lock("reports").owner_key == "rp:lock:{reports}:owner"
    settings.REDISPARTS = {**settings.REDISPARTS, "KEY_PREFIX": "other"}
    assert Lock("reports").owner_key == "other:lock:{reports}:owner"
    settings.REDISPARTS = {**settings.REDISPARTS, "MAX_KEY_PART_LENGTH": 3}
    with pytest.raises(InvalidArgument, match="longer than 3"):
        Lock("reports")


# -- acquire, release, extend --------------------------------------------------------------


def test_context_manager_holds_the_lock_with_a_ttl_and_releases_it(redis_client, new_lock):
    with new_lock("reports", ttl=2, timeout=1) as lock:
        assert lock.held
        assert lock.owned()
        assert lock.fence == 1
        assert redis_client.get(lock.owner_key) == lock.token.encode()
        assert 0 < redis_client.pttl(lock.owner_key) <= 2000
        with pytest.raises(LockTimeout) as caught:
            new_lock("reports", ttl=2, timeout=0.2).acquire()
        assert isinstance(caught.value, RedisPartsError)
        assert caught.value.name == "reports"
    assert not lock.held
    assert redis_client.exists(lock.owner_key) == 0


def test_a_with_block_on_a_held_lock_waits_for_it_or_times_out(redis_client):
    holder = Lock("reports", ttl=0.3, timeout=1)
    holder.acquire()  # never released: its TTL runs out
    with pytest.raises(LockTimeout), Lock("reports", ttl=2, timeout=0.05):
        pass
    with Lock("reports", ttl=2, timeout=5) as lock:  # the first attempt fails, the wait wins
        assert lock.fence == 2
        assert [held.name for held in held_locks()] == ["reports"]
    assert redis_client.exists(lock.owner_key) == 0


def test_a_with_block_loads_its_scripts_again_after_a_script_flush(redis_client, redis_admin):
    redis_admin.script_flush()  # as after a restart: the acquire's EVALSHA misses
    with Lock("reports", ttl=2, timeout=1) as lock:
        assert redis_client.get(lock.owner_key) == lock.token.encode()
        redis_admin.script_flush()  # and now the release's
    assert not lock.held
    assert redis_client.exists(lock.owner_key) == 0
    assert redis_client.llen(lock.signal_key) == 1  # the release's wake-up signal


def test_each_acquisition_gets_a_new_owner_token(redis_client, new_lock):
    lock = new_lock("reports", ttl=2, timeout=1)
    lock.acquire()
    first = lock.token
    lock.release()
    lock.acquire()
    assert lock.token != first
    assert lock.fence == 2
    with pytest.raises(RuntimeError, match="already held"):
        lock.acquire()
    lock.release()


def test_try_acquire_makes_one_attempt(redis_client):
    holder = Lock("reports", ttl=2, timeout=1)
    assert holder.try_acquire() == 1
    counting = counting_like(redis_client)
    assert Lock("reports", ttl=2, timeout=1, client=counting).try_acquire() is None
    assert counting.commands == ["EVALSHA"]


def test_failed_attempts_leave_no_token_and_the_next_holding_owns_the_lock(redis_client, new_lock):
    holder = new_lock("reports", ttl=2, timeout=1)
    holder.acquire()
    poller = new_lock("reports", ttl=2, timeout=0.05)
    assert poller.try_acquire() is None
    with pytest.raises(LockTimeout):
        poller.acquire()
    assert poller.try_acquire() is None
    assert poller.token is None
    assert not poller.held
    assert redis_client.get(holder.owner_key) == holder.token.encode()
    holder.release()
    assert poller.try_acquire() == 2
    assert redis_client.get(poller.owner_key) == poller.token.encode()
    first = poller.token
    poller.release()
    # A token that once held the lock is never used again.
    assert poller.try_acquire() == 3
    assert poller.token not in (first, holder.token)
    poller.release()


def test_expired_holder_cannot_release_or_extend_the_new_holders_lock(redis_client, new_lock):
    old = new_lock("reports", ttl=0.5, timeout=1)
    old.acquire()
    new = new_lock("reports", ttl=30, timeout=10)
    new.acquire()  # waits for the old holder's TTL to run out
    with pytest.raises(LockNotOwned):
        old.extend(30)
    with pytest.raises(LockNotOwned):
        old.release()
    assert old.lost.is_set()
    assert redis_client.get(new.owner_key) == new.token.encode()
    assert redis_client.pttl(new.owner_key) > 20000
    new.extend(40)
    assert redis_client.pttl(new.owner_key) > 30000
    new.release()


def test_lock_with_a_one_second_ttl_is_acquirable_after_it_expires(redis_client, new_lock):
    abandoned = new_lock("reports", ttl=1, timeout=1)
    abandoned.acquire()  # never released, as if its holder crashed
    assert new_lock("reports", ttl=1, timeout=1).try_acquire() is None
    later = new_lock("reports", ttl=1, timeout=10)
    assert later.acquire() == 2
    assert later.owned()
    assert not abandoned.owned()


def test_leaving_the_block_after_losing_the_lock_raises_lock_not_owned(redis_client, new_lock):
    lock = new_lock("reports", ttl=5, timeout=1)
    with pytest.raises(LockNotOwned, match="expired or another holder"), lock:
        redis_client.delete(lock.owner_key)  # as if its TTL ran out

    def fail_after_losing_it() -> None:
        with lock:
            redis_client.delete(lock.owner_key)
            raise KeyError("the block's own error is not masked")

    with pytest.raises(KeyError, match="not masked"):
        fail_after_losing_it()


# -- fencing -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_fence_increases_across_holders_and_a_stale_holders_update_is_rejected(redis_client):
    record = FencedRecord.objects.create(name="stock", value=0)
    stale = Lock("stock", ttl=0.5, timeout=1)
    stale_fence = stale.acquire()
    current = Lock("stock", ttl=30, timeout=10)
    current_fence = current.acquire()  # after the stale holder's TTL ran out
    assert current_fence > stale_fence
    assert fenced_update(FencedRecord, record.pk, current_fence, value=2) is True
    # The stale holder wakes up and writes: the database refuses it.
    assert fenced_update(FencedRecord.objects, record.pk, stale_fence, value=1) is False
    record.refresh_from_db()
    assert (record.value, record.fence) == (2, current_fence)
    # The same token cannot write twice over a later one, and a later holder can.
    current.release()
    later = Lock("stock", ttl=30, timeout=1)
    later_fence = later.acquire()
    assert later_fence > current_fence
    assert fenced_update(FencedRecord.objects.filter(name="stock"), record.pk, later_fence, value=3)
    assert not fenced_update(FencedRecord, record.pk, current_fence, value=9)
    record.refresh_from_db()
    assert (record.value, record.fence) == (3, later_fence)
    assert fenced_update(FencedRecord, record.pk + 1000, later_fence + 1, value=4) is False


@pytest.mark.django_db
@pytest.mark.parametrize("fence", [0, -1, True, "3", None, 1.5])
def test_fenced_update_refuses_a_bad_fence(fence):
    with pytest.raises(ValueError, match="fence"):
        fenced_update(FencedRecord, 1, fence, value=1)


# -- introspection -------------------------------------------------------------------------


def test_held_locks_lists_name_owner_ttl_and_fence(redis_client, new_lock):
    assert held_locks() == []
    reports = new_lock("reports", ttl=5, timeout=1)
    reports.acquire()
    reports.release()
    reports.acquire()
    chinese = new_lock("报表", ttl=10, timeout=1)
    chinese.acquire()
    found = held_locks()
    assert [held.name for held in found] == ["reports", "报表"]
    first, second = found
    assert isinstance(first, HeldLock)
    assert (first.owner, first.fence) == (reports.token, 2)
    assert (second.owner, second.fence) == (chinese.token, 1)
    assert 0 < first.ttl <= 5
    assert 5 < second.ttl <= 10
    chinese.release()
    assert [held.name for held in held_locks(client=redis_client)] == ["reports"]


def test_force_release_refuses_a_malformed_owner_as_semaphores_do(redis_client):
    lock = Lock("stuck", ttl=30)
    lock.acquire()
    for owner in ["another-token", "", None, lock.token.upper(), lock.token + "0"]:
        with pytest.raises(InvalidArgument, match="invalid owner token"):
            force_release("stuck", owner)
    assert lock.owned()
    assert force_release("stuck", "0" * 32) is False  # well formed, not the owner's
    assert force_release("stuck", lock.token) is True
    assert not lock.owned()


def test_rp_locks_lists_held_locks_as_a_table_and_as_json(redis_client, capsys):
    call_command("rp_locks")
    assert "No lock is held." in capsys.readouterr().out
    lock = Lock("报表", ttl=10, timeout=1)
    lock.acquire()
    call_command("rp_locks")
    table = capsys.readouterr().out
    assert "报表" in table
    assert lock.token in table
    call_command("rp_locks", "--json")
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["name"], row["owner"], row["fence"]) == ("报表", lock.token, 1)
    assert 0 < row["ttl"] <= 10


@pytest.mark.single_server  # points CACHES at a dead server
def test_rp_locks_exits_3_when_redis_is_unreachable():
    caches = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }
    with override_settings(CACHES=caches), pytest.raises(CommandError, match="cannot reach") as e:
        call_command("rp_locks")
    assert e.value.returncode == 3


# -- several processes ---------------------------------------------------------------------

COUNTER = "test:locks:counter"
INCREMENTS = "test:locks:increments"


def _increment_under_lock(count: int) -> list[int]:
    client = get_redis()
    fences = []
    for _ in range(count):
        with Lock("counter", ttl=5, timeout=60, client=client) as lock:
            value = int(client.get(COUNTER) or 0)  # read-modify-write: unsafe without the lock
            client.set(COUNTER, value + 1)
            client.incr(INCREMENTS)
            fences.append(lock.fence)
    return fences


@pytest.mark.slow
def test_four_processes_lose_no_read_modify_write_increment(redis_client):
    results = run_in_processes(_increment_under_lock, [(500,)] * 4, timeout=120)
    assert int(redis_client.get(INCREMENTS)) == 2000
    assert int(redis_client.get(COUNTER)) == 2000
    # Every holder got its own fence, and each process saw its fences increase.
    assert sorted(fence for fences in results for fence in fences) == list(range(1, 2001))
    assert all(fences == sorted(fences) for fences in results)


def _hold_and_report(name: str, auto_renew: bool) -> None:
    client = get_redis()
    lock = Lock(name, ttl=1, timeout=10, client=client, auto_renew=auto_renew)
    lock.acquire()
    client.rpush(READY, lock.fence)
    report: dict[str, object] = {"fence": lock.fence}
    if auto_renew:
        # The heartbeat keeps the lock until the process is stopped past its TTL.
        report["lost"] = lock.lost.wait(60)
    else:
        client.blpop([RESUME], timeout=60)
    for action in ("extend", "release"):
        try:
            getattr(lock, action)()
            report[action] = "done"
        except LockNotOwned:
            report[action] = "not owned"
    client.rpush(RESULT, json.dumps(report))


@pytest.mark.slow
@pytest.mark.parametrize("auto_renew", [False, True], ids=["plain", "auto-renew"])
def test_holder_paused_past_its_ttl_loses_the_lock_and_learns_it_on_resume(
    redis_client, auto_renew
):
    child = CONTEXT.Process(target=_hold_and_report, args=("paused", auto_renew), daemon=True)
    child.start()
    try:
        ready = redis_client.blpop([READY], timeout=30)
        assert ready is not None, "the child never took the lock"
        child_fence = int(ready[1])
        os.kill(child.pid, signal.SIGSTOP)
        taker = Lock("paused", ttl=30, timeout=20)
        taker_fence = taker.acquire()  # possible only once the paused holder's TTL ran out
        assert taker_fence > child_fence
        os.kill(child.pid, signal.SIGCONT)
        redis_client.rpush(RESUME, 1)
        result = redis_client.blpop([RESULT], timeout=60)
        assert result is not None, "the child did not report"
        report = json.loads(result[1])
        assert report["extend"] == "not owned"
        assert report["release"] == "not owned"
        if auto_renew:
            assert report["lost"] is True
        # The resumed holder touched nothing: the taker still owns its lock.
        assert redis_client.get(taker.owner_key) == taker.token.encode()
        assert redis_client.pttl(taker.owner_key) > 20000
        taker.release()
    finally:
        if child.is_alive():
            os.kill(child.pid, signal.SIGCONT)
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()


def _try_to_take(name: str, wait: float) -> str:
    try:
        Lock(name, ttl=1.5, timeout=wait).acquire()
    except LockTimeout:
        return "timed out"
    return "acquired"


@pytest.mark.slow
def test_auto_renewal_keeps_the_lock_through_work_three_times_its_ttl(redis_client):
    ttl = 1.5
    lost = []
    # Renewing every 0.25 s tolerates a stall of over a second on this loaded machine.
    lock = Lock(
        "renewed", ttl=ttl, timeout=5, auto_renew=True, renew_interval=0.25, on_lost=lost.append
    )
    started = time.monotonic()
    lock.acquire()
    # The "work": two other processes try to take the lock for 3 TTLs and more.
    outcomes = run_in_processes(_try_to_take, [("renewed", 3 * ttl + 0.2)] * 2, timeout=60)
    assert time.monotonic() - started >= 3 * ttl
    assert outcomes == ["timed out", "timed out"]
    assert not lock.lost.is_set()
    assert lost == []
    assert lock.owned()
    lock.release()
    assert int(redis_client.get(lock.fence_key)) == 1  # no one else ever acquired it


def _hold_until_a_waiter_blocks(name: str) -> None:
    client = get_redis()
    lock = Lock(name, ttl=60, timeout=10, client=client)
    lock.acquire()
    client.rpush(READY, lock.fence)
    deadline = time.monotonic() + 30
    server = slot_client(client, lock_keys(name)[2])  # the server of the wake-up list
    while server.info("clients")["blocked_clients"] < 1:
        if time.monotonic() > deadline:
            raise AssertionError("no waiter blocked on the lock")
        time.sleep(0.02)
    lock.release()


@pytest.mark.slow
def test_waiter_wakes_on_the_release_signal_without_polling(redis_client):
    child = CONTEXT.Process(target=_hold_until_a_waiter_blocks, args=("signalled",), daemon=True)
    child.start()
    try:
        assert redis_client.blpop([READY], timeout=30) is not None
        counting = counting_like(redis_client)
        # The holder's TTL is 60 s and the wait 30 s: only its release can let us in.
        waiter = Lock("signalled", ttl=5, timeout=30, client=counting)
        assert waiter.acquire() == 2
        # One failed attempt, one BLPOP woken by the release, one successful attempt, and
        # the name's registration once held (a new client's first hold of it).
        assert counting.commands == ["EVALSHA", "BLPOP", "EVALSHA", "ZADD"]
        waiter.release()
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()
    assert child.exitcode == 0


WAKING_SECONDS = 1.0


def _hold_and_wake_waiters(name: str) -> None:
    """Hold the lock and, for WAKING_SECONDS, push a wake-up whenever the list is empty: what
    a holder releasing and taking the lock straight back at full speed leaves a waiter."""
    client = get_redis()
    lock = Lock(name, ttl=60, timeout=10, client=client)
    lock.acquire()
    client.rpush(READY, 1)
    signal_key = lock_keys(name)[2]
    server = slot_client(client, signal_key)
    while server.info("clients")["blocked_clients"] < 1:
        time.sleep(0.01)
    wake_ups = 0
    end = time.monotonic() + WAKING_SECONDS
    while time.monotonic() < end:
        if client.llen(signal_key) == 0:
            client.lpush(signal_key, "1")
            wake_ups += 1
    client.rpush(RESULT, wake_ups)
    lock.release()


@pytest.mark.slow
def test_a_waiter_that_loses_after_each_wake_up_backs_off_to_one_try_per_32_ms(
    redis_client, new_lock
):
    child = CONTEXT.Process(target=_hold_and_wake_waiters, args=("retaken",), daemon=True)
    child.start()
    try:
        assert redis_client.blpop([READY], timeout=30) is not None
        # Only the child's release lets the waiter in; until then every wake-up loses.
        assert new_lock("retaken", ttl=5, timeout=30).acquire() == 2
        child.join(10)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join()
    wake_ups = int(redis_client.lpop(RESULT))
    # Each lost wake-up is followed by a sleep of 1, 2, 4, 8, 16, then 32 ms: a waiter
    # woken at every release took 900 to 1,300 of them in a second.
    assert 5 <= wake_ups <= 6 + WAKING_SECONDS / BACKOFF_LONGEST + 1


def _take_and_crash(name: str) -> None:
    client = get_redis()
    Lock(name, ttl=1, timeout=10, client=client).acquire()
    client.rpush(READY, 1)
    os._exit(0)  # dies holding the lock: no release, no wake-up signal


@pytest.mark.slow
def test_waiter_takes_the_lock_of_a_crashed_holder_when_its_ttl_runs_out(redis_client):
    child = CONTEXT.Process(target=_take_and_crash, args=("crashed",), daemon=True)
    child.start()
    assert redis_client.blpop([READY], timeout=30) is not None
    child.join(10)
    assert redis_client.exists(lock_keys("crashed")[0]) == 1
    counting = counting_like(redis_client)
    waiter = Lock("crashed", ttl=5, timeout=20, client=counting)
    assert waiter.acquire() == 2
    # Each BLPOP lasts the holder's remaining TTL: a few commands, not a 1 ms poll loop.
    assert counting.commands.count("BLPOP") <= 4
    assert len(counting.commands) <= 11
    # The successful attempt, then the name's registration (this client's first hold).
    assert counting.commands[-2:] == ["EVALSHA", "ZADD"]


# -- Redis Cluster ---------------------------------------------------------------------------


def test_locks_of_several_slots_with_fences_and_wake_ups(redis_client, new_lock):
    client = redis_client
    names = ["alpha", "beta", "gamma"]
    assert len({keys.slot_of(lock_keys(name)[0]) for name in names}) == len(names)
    locks = [new_lock(name, ttl=5, timeout=1, client=client, auto_renew=True) for name in names]
    for lock in locks:
        assert lock.acquire() == 1
        with pytest.raises(LockTimeout):  # waits on BLPOP through the cluster client
            new_lock(lock.name, ttl=5, timeout=0.2, client=client).acquire()
        lock.extend(10)
    found = held_locks(client=client)
    assert [held.name for held in found] == names
    assert [held.owner for held in found] == [lock.token for lock in locks]
    assert all(held.fence == 1 and 5 < held.ttl <= 10 for held in found)
    for lock in locks:
        lock.release()
    assert held_locks(client=client) == []
    with new_lock("gamma", ttl=5, timeout=1, client=client) as again:
        assert again.fence == 2
