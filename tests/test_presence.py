import random

import pytest

from redisparts_app.connection import get_redis
from redisparts_app.exceptions import InvalidArgument
from redisparts_app.keys import component_pattern, scan_keys, slot_of
from redisparts_app.services import presence

pytestmark = pytest.mark.cluster

START = 1_800_000_000.0  # a whole minute


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def presence_keys() -> list[bytes]:
    return sorted(scan_keys(get_redis(), component_pattern("presence")))


def test_online_for_ten_whole_minutes_then_offline(face):
    p = face(presence)
    clock = Clock(START + 30)  # half-way through minute 0
    p.record_activity("ann", clock=clock)
    for method in ("minutes", "seen"):
        assert p.online_users(method=method, clock=clock) == {"ann"}
    clock.now = START + 9 * 60 + 59  # last second of minute 9: still in the window
    assert p.online_users(method="minutes", clock=clock) == {"ann"}
    assert p.online_users(method="seen", clock=clock) == {"ann"}
    assert p.is_online("ann", clock=clock)
    clock.now = START + 10 * 60  # minute 10: minute 0 has left the window
    assert p.online_users(method="minutes", clock=clock) == set()
    assert p.online_users(method="seen", clock=clock) == set()
    assert not p.is_online("ann", clock=clock)


def test_both_methods_agree_over_fifteen_simulated_minutes(face, redis_client):
    """Random activity and logouts every 10 s; both methods match each other and a model."""
    p = face(presence)
    rng = random.Random(7)
    users = [f"user{n}" for n in range(25)]
    devices = ["phone", "laptop"]
    clock = Clock(START)
    last_activity: dict[str, float] = {}
    device_seen: dict[tuple[str, str], float] = {}
    offline_since: dict[str, float] = {}
    checks = 0
    for step in range(15 * 6):
        clock.now = START + step * 10
        window_start = (clock.now // 60 - 9) * 60
        for user in rng.sample(users, 3):
            device = rng.choice(devices)
            p.record_activity(user, device, clock=clock)
            last_activity[user] = device_seen[user, device] = clock.now
        if step % 4 == 0:
            user = rng.choice(sorted(last_activity))
            device = rng.choice(devices)
            device_seen.pop((user, device), None)
            others = [t for (u, _d), t in device_seen.items() if u == user and t >= window_start]
            offline = p.logout(user, device, clock=clock)
            assert offline == (not others)
            if offline:
                offline_since[user] = clock.now
        expected = {
            user
            for user, seen in last_activity.items()
            if seen >= window_start and offline_since.get(user, -1) < seen
        }
        by_minutes = p.online_users(method="minutes", clock=clock)
        by_seen = p.online_users(method="seen", clock=clock)
        assert by_minutes == by_seen == expected, f"at step {step}"
        checks += bool(expected)
    assert checks > 80
    # Minute sets and devices sets expire; nothing unbounded is left without a TTL.
    for key in presence_keys():
        if b":minute:" in key or b":devices:" in key:
            assert redis_client.ttl(key) > 0, key


def test_devices_of_one_user_count_once_and_logout_waits_for_the_last(face):
    p = face(presence)
    clock = Clock(START)
    p.record_activity("bob", "phone", clock=clock)
    p.record_activity("bob", "laptop", clock=clock)
    p.record_activity("bob", "tab-2", clock=clock)
    p.record_activity("cat", clock=clock)
    assert p.online_users(method="minutes", clock=clock) == {"bob", "cat"}
    assert p.online_users(method="seen", clock=clock) == {"bob", "cat"}
    assert p.logout("bob", "phone", clock=clock) is False
    assert p.logout("bob", "tab-2", clock=clock) is False
    assert p.is_online("bob", clock=clock)
    assert p.logout("bob", "laptop", clock=clock) is True
    for method in ("minutes", "seen"):
        assert p.online_users(method=method, clock=clock) == {"cat"}
    assert not p.is_online("bob", clock=clock)
    p.record_activity("bob", "phone", clock=clock)  # back again
    assert p.is_online("bob", clock=clock)


def test_a_device_idle_beyond_the_window_does_not_keep_a_user_online(face):
    p = face(presence)
    clock = Clock(START)
    p.record_activity("dan", "old-tablet", clock=clock)
    clock.now += 12 * 60
    p.record_activity("dan", "phone", clock=clock)
    assert p.logout("dan", "phone", clock=clock) is True
    assert p.online_users(method="minutes", clock=clock) == set()
    assert p.online_users(method="seen", clock=clock) == set()


def test_friends_are_mutual_and_removable(face):
    p = face(presence)
    p.add_friend("ann", "bob")
    p.add_friend("ann", "cat")
    assert p.friends("ann") == {"bob", "cat"}
    assert p.friends("bob") == {"ann"}
    p.remove_friend("bob", "ann")
    assert p.friends("ann") == {"cat"}
    assert p.friends("bob") == set()
    with pytest.raises(InvalidArgument, match="nobody befriends themselves"):
        p.add_friend("ann", "ann")
    with pytest.raises(InvalidArgument):
        p.add_friend("ann", "x:y")


@pytest.mark.parametrize("method", ["minutes", "seen"])
def test_online_friends_is_the_intersection_and_adds_no_key(method, face):
    p = face(presence)
    clock = Clock(START)
    for friend in ("bob", "cat", "dan", "eve"):
        p.add_friend("ann", friend)
    p.record_activity("bob", clock=clock)
    clock.now += 5 * 60
    p.record_activity("cat", clock=clock)
    p.record_activity("zed", clock=clock)  # online, not a friend
    p.record_activity("ann", clock=clock)
    clock.now += 4 * 60 + 30  # bob's minute still in the window
    p.record_activity("dan", clock=clock)
    p.logout("dan", clock=clock)
    keys_before = presence_keys()
    assert p.online_friends("ann", method=method, clock=clock) == {"bob", "cat"}
    expected = p.online_users(method=method, clock=clock) & p.friends("ann")
    assert expected == {"bob", "cat"}
    clock.now += 60  # bob's minute leaves the window
    assert p.online_friends("ann", method=method, clock=clock) == {"cat"}
    assert p.online_friends("nobody", method=method, clock=clock) == set()
    assert presence_keys() == keys_before


def test_keys_of_one_atomic_step_share_a_cluster_slot():
    slots = {
        slot_of(key)
        for key in (
            presence.minute_key(1),
            presence.minute_key(29_000_000),
            presence.seen_key(),
            presence.friends_key("ann"),
            presence.devices_key("ann"),
        )
    }
    assert len(slots) == 1


@pytest.mark.parametrize("user", ["", "a:b", "a{b}", "x" * 500, "tab\there"])
def test_bad_user_is_refused_before_anything_is_written(redis_client, user, face):
    p = face(presence)
    with pytest.raises(InvalidArgument):
        p.record_activity(user)
    with pytest.raises(InvalidArgument):
        p.logout(user)
    assert redis_client.dbsize() == 0


def test_unicode_users_work(face):
    p = face(presence)
    clock = Clock(START)
    p.add_friend("小明", "Zoë")
    p.record_activity("Zoë", clock=clock)
    assert p.online_friends("小明", clock=clock) == {"Zoë"}
