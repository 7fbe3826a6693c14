import collections
import io
import time

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from redisparts_app.connection import get_redis
from redisparts_app.exceptions import InvalidArgument
from redisparts_app.keys import slot_of
from redisparts_app.services import counters
from redisparts_app.services.counters import (
    clean_counters,
    counter_key,
    get_counter,
    index_key,
    known_counters,
    update_counter,
)
from tests.processes import CONTEXT, run_in_processes

pytestmark = pytest.mark.cluster

D = 1_700_000_000 - 1_700_000_000 % 86400  # midnight UTC of some day (epoch seconds)
PRECISIONS = [1, 5, 60, 300, 3600, 18000, 86400]


def at(seconds: float):
    return lambda: seconds


def test_each_precision_buckets_by_its_own_interval(redis_client, face):
    svc = face(counters)
    times = [D + 59.9, D + 59.9, D + 60.2, D + 64, D + 65, D + 299, D + 3600 * 5 + 1]
    for now in times:
        svc.update_counter("hits", clock=at(now))
    svc.update_counter("hits", 10, clock=at(D + 86400 + 3))
    assert svc.get_counter("hits", 1) == [
        (D + 59, 2),
        (D + 60, 1),
        (D + 64, 1),
        (D + 65, 1),
        (D + 299, 1),
        (D + 18001, 1),
        (D + 86403, 10),
    ]
    assert svc.get_counter("hits", 5) == [
        (D + 55, 2),
        (D + 60, 2),
        (D + 65, 1),
        (D + 295, 1),
        (D + 18000, 1),
        (D + 86400, 10),
    ]
    assert svc.get_counter("hits", 60) == [
        (D, 2),
        (D + 60, 3),
        (D + 240, 1),
        (D + 18000, 1),
        (D + 86400, 10),
    ]
    assert svc.get_counter("hits", 300) == [(D, 6), (D + 18000, 1), (D + 86400, 10)]
    assert svc.get_counter("hits", 3600) == [(D, 6), (D + 18000, 1), (D + 86400, 10)]
    # 5 h buckets start at multiples of 18000 s since the epoch, not at midnight
    assert svc.get_counter("hits", 18000) == [(D, 6), (D + 18000, 1), (D + 72000, 10)]
    assert svc.get_counter("hits", 86400) == [(D, 7), (D + 86400, 10)]
    for precision in PRECISIONS:
        expected = collections.Counter(int(t // precision) * precision for t in times)
        expected[int((D + 86403) // precision) * precision] += 10
        assert svc.get_counter("hits", precision) == sorted(expected.items())


def test_counts_may_be_negative_and_unknown_counters_are_empty(redis_client, face):
    svc = face(counters)
    svc.update_counter("stock", 5, clock=at(D))
    svc.update_counter("stock", -2, clock=at(D))
    assert svc.get_counter("stock", 60) == [(D, 3)]
    assert svc.get_counter("nothing", 60) == []


def test_updates_queue_on_a_pipeline_given_as_client(redis_client):
    pipe = redis_client.pipeline()
    update_counter("hits", clock=at(D), client=pipe)
    update_counter("hits", 2, clock=at(D), client=pipe)
    assert get_counter("hits", 60) == []  # queued, not sent
    pipe.execute()
    assert get_counter("hits", 60) == [(D, 3)]
    assert list(known_counters()) == ["hits"]


def test_keys_share_a_slot_per_counter_expire_and_are_indexed(redis_client, face):
    svc = face(counters)
    svc.update_counter("hits", clock=at(D))
    hashes = [counter_key("hits", p) for p in PRECISIONS]
    assert len({slot_of(key) for key in hashes}) == 1
    for precision, key in zip(PRECISIONS, hashes, strict=True):
        assert 0 < redis_client.ttl(key) <= precision * 121
    assert known_counters() == {"hits": PRECISIONS}
    assert redis_client.zcard(index_key()) == len(PRECISIONS)


def test_bad_input_is_refused_before_any_write(redis_client, face):
    svc = face(counters)
    for name in ["", "a:b", "{a}", "a*", "x" * 300, "tab\there", 42]:
        with pytest.raises(InvalidArgument):
            svc.update_counter(name)
    for count in [1.5, "1", True, None, 2**60]:
        with pytest.raises(InvalidArgument, match="count"):
            svc.update_counter("hits", count)
    for precision in [2, 0, -1, "60", 60.0]:
        with pytest.raises(InvalidArgument, match="precision"):
            svc.get_counter("hits", precision)
    assert redis_client.dbsize() == 0


def _count_many(worker: int, updates: int) -> int:
    for _ in range(updates):
        update_counter("shared", clock=at(D + 30))
    return updates


@pytest.mark.slow
def test_concurrent_updates_from_processes_sum_correctly(redis_client):
    done = run_in_processes(_count_many, [(w, 400) for w in range(4)])
    for precision in PRECISIONS:
        assert get_counter("shared", precision) == [(D + 30 - 30 % precision, sum(done))]


@override_settings(REDISPARTS={"COUNTER_SAMPLES": 3, "COUNTER_PRECISIONS": [1, 60]})
def test_cleaner_keeps_the_configured_number_of_samples(redis_client):
    for second in range(10):
        update_counter("hits", clock=at(D + second))
    report = clean_counters(clock=at(D + 9.5))
    assert get_counter("hits", 1) == [(D + 7, 1), (D + 8, 1), (D + 9, 1)]
    assert get_counter("hits", 60) == [(D, 10)]
    assert (report.checked, report.trimmed, report.forgotten) == (2, 7, 0)
    assert known_counters() == {"hits": [1, 60]}


@override_settings(REDISPARTS={"COUNTER_SAMPLES": 2, "COUNTER_PRECISIONS": [1, 300]})
def test_cleaner_forgets_empty_counters_and_skips_slow_precisions_between_passes(redis_client):
    update_counter("old", clock=at(D))
    update_counter("fresh", clock=at(D + 5000))
    report = clean_counters(clock=at(D + 5000), pass_number=1, interval=60)
    # pass 1: the 300 s hashes wait for a pass number divisible by 300 // 60 = 5
    assert (report.checked, report.forgotten) == (2, 1)
    assert known_counters() == {"fresh": [1, 300], "old": [300]}
    report = clean_counters(clock=at(D + 5000), pass_number=5, interval=60)
    assert (report.checked, report.forgotten) == (3, 1)
    assert known_counters() == {"fresh": [1, 300]}
    assert get_counter("old", 300) == []
    assert get_counter("fresh", 300) == [(D + 4800, 1)]


NOW = D + 10_000
RACE_COUNTERS = 100


def _write_right_after_each_trim(worker: int) -> int:
    client = get_redis()
    for j in range(RACE_COUNTERS):
        name = f"w{worker}c{j}"
        update_counter(name, clock=at(NOW - 1000))  # an old sample the cleaner trims
        deadline = time.monotonic() + 30
        while client.exists(counter_key(name, 1)):
            assert time.monotonic() < deadline, "the cleaner never trimmed the counter"
        # The hash was just emptied: the cleaner is about to forget the counter. Write now.
        update_counter(name, clock=at(NOW))
    client.incr("test:writers-done")
    return RACE_COUNTERS


def _clean_until_writers_finish(writers: int) -> int:
    forgotten = passes = 0
    while int(get_redis().get("test:writers-done") or 0) < writers:
        forgotten += clean_counters(clock=at(NOW), pass_number=passes).forgotten
        passes += 1
    return forgotten


def _dispatch(target, args):
    return target(*args)


@pytest.mark.slow
# 100 samples: the hashes (TTL 101 s) outlive the test; the old sample is still trimmed.
@override_settings(REDISPARTS={"COUNTER_SAMPLES": 100, "COUNTER_PRECISIONS": [1]})
def test_a_write_racing_the_cleaner_is_not_lost(redis_client):
    writers = 3
    jobs = [(_write_right_after_each_trim, (w,)) for w in range(writers)]
    jobs.append((_clean_until_writers_finish, (writers,)))
    results = run_in_processes(_dispatch, jobs, timeout=120)
    known = known_counters()
    for worker in range(writers):
        for j in range(RACE_COUNTERS):
            name = f"w{worker}c{j}"
            assert get_counter(name, 1) == [(NOW, 1)], name
            assert known.get(name) == [1], f"{name} has samples but left the index"
    assert len(known) == writers * RACE_COUNTERS
    assert sum(results[:writers]) == writers * RACE_COUNTERS


def test_clean_command_once(redis_client):
    update_counter("old", clock=at(D))
    update_counter("new")
    out = io.StringIO()
    call_command("rp_clean_counters", "--once", stdout=out)
    assert "forgot 7 counters" in out.getvalue()
    assert list(known_counters()) == ["new"]


def test_clean_command_bad_arguments_and_redis_down(tmp_path):
    for bad in (["--interval", "0"], ["--interval", "-5"], ["--interval", "nan"]):
        with pytest.raises(CommandError, match="--interval must be a positive") as info:
            call_command("rp_clean_counters", *bad)
        assert info.value.returncode == 2
    with pytest.raises(CommandError, match="invalid float value"):
        call_command("rp_clean_counters", "--interval", "soon")
    with override_settings(REDISPARTS={"COUNTER_SAMPLES": 0}):
        with pytest.raises(CommandError, match="COUNTER_SAMPLES") as info:
            call_command("rp_clean_counters", "--once")
        assert info.value.returncode == 2
    dead = {"CONNECTIONS": {"default": f"unix://{tmp_path}/no.sock"}}
    with override_settings(REDISPARTS=dead):
        with pytest.raises(CommandError, match="cannot reach Redis") as info:
            call_command("rp_clean_counters", "--once")
        assert info.value.returncode == 3


def _run_cleaner_loop() -> None:
    call_command("rp_clean_counters", "--interval", "0.1", stdout=io.StringIO())


@pytest.mark.slow
@override_settings(REDISPARTS={"COUNTER_PRECISIONS": [1]})  # cleaned every 1 s / 0.1 s passes
def test_clean_command_loops_until_sigterm(redis_client):
    update_counter("old", clock=at(D))
    cleaner = CONTEXT.Process(target=_run_cleaner_loop)
    cleaner.start()
    try:
        deadline = time.monotonic() + 30
        while redis_client.exists(index_key()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not redis_client.exists(index_key())
        update_counter("old", clock=at(D))  # the next passes find it too
        while redis_client.exists(index_key()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not redis_client.exists(index_key())
    finally:
        cleaner.terminate()  # SIGTERM: the loop stops after the current pass
        cleaner.join(30)
    assert cleaner.exitcode == 0
