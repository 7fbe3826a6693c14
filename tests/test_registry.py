"""The components' registries: listings and figures without SCAN, and what pruning keeps."""

import time

import pytest
from django.core.management import call_command

from redisparts_app.connection import get_redis
from redisparts_app.exceptions import InvalidArgument, InvalidArgumentType
from redisparts_app.keys import make_key
from redisparts_app.services import chat, config, figures, files, listings, logs, registry, stats
from redisparts_app.services.autocomplete import AddressBook, books_of
from redisparts_app.services.locks import Lock, held_locks
from redisparts_app.services.semaphores import Semaphore, semaphore_names
from redisparts_app.services.tasks import TaskQueue, queue_groups

from .processes import run_in_processes

pytestmark = pytest.mark.cluster


def zadd_calls(client) -> int:
    return client.info("commandstats").get("cmdstat_zadd", {}).get("calls", 0)


def test_each_component_registers_the_names_it_uses(redis_client, tmp_path):
    files.copy_logs_to_redis(tmp_path, "nightly", processors=1, limit=1)  # awaits processor 0
    Lock("door", ttl=30).acquire()
    Semaphore("slots", limit=2).acquire()
    chat.create_chat("ann", ["bob"], "hello", chat_id="c1")
    TaskQueue("mail").enqueue("send", on_commit=False)
    AddressBook("knights").join("ann")
    config.set_config("logs", "web", {"level": 3})
    logs.log_recent("web", "started")
    stats.update_stats("home", "time", 0.2)
    assert {c: registry.names(c) for c in registry.COMPONENTS} == {
        "lock": ["door"],
        "semaphore": ["slots"],
        "chat": ["c1", "nightly"],
        "queue": ["mail"],
        "ac": ["knights"],
        "config": ["logs:web"],
        "log": ["web"],
        "stats": ["home:time"],
        "files": ["nightly"],
    }
    assert [lock.name for lock in held_locks()] == ["door"]
    assert semaphore_names() == ["slots"]
    assert queue_groups() == ["mail"]
    assert figures.inventory() == {
        "queue": {"mail"}, "lock": {"door"}, "semaphore": {"slots"}, "chat": {"c1", "nightly"}
    }  # fmt: skip
    assert listings.config_page().items == [("logs", "web")]
    assert listings.log_page().items == ["web"]
    assert listings.stats_entries() == [("home", "time")]
    assert listings.guild_page().items == ["knights"]
    assert books_of("ann") == ["knights"]
    assert files.channels() == ["nightly"]
    files.process_logs_from_redis("nightly", "0", print)  # the last one out ends it
    assert files.channels() == []
    assert "nightly" not in registry.names("files")


@pytest.mark.single_server  # counted with INFO commandstats of the one server
def test_a_name_is_sent_once_per_interval_not_once_per_use(redis_client):
    lock = Lock("hot", ttl=30)
    lock.acquire()
    lock.release()
    before = zadd_calls(redis_client)
    for _ in range(50):
        lock.acquire()
        lock.release()
    assert zadd_calls(redis_client) == before  # the hot path pays a dict lookup
    registry.forget_noted()
    lock.acquire()
    assert zadd_calls(redis_client) == before + 1


@pytest.mark.single_server
def test_listings_figures_and_the_dashboard_never_scan(redis_client, admin_client):
    for n in range(30):
        Lock(f"lock{n}", ttl=30).acquire()
        chat.create_chat("ann", [f"user{n}"], "hi", chat_id=f"c{n}")
    Semaphore("slots", limit=2).acquire()
    TaskQueue().enqueue("send", on_commit=False)
    for n in range(2000):  # the rest of a keyspace: keys of no registered component
        redis_client.set(make_key("mail", f"user{n}", "inbox"), "x")
    redis_client.config_resetstat()
    held_locks()
    semaphore_names()
    queue_groups()
    figures.inventory()
    for name in ("lock_page", "semaphore_page", "chat_page", "guild_page", "config_page"):
        getattr(listings, name)()
    assert admin_client.get("/admin/redisparts_app/redisparts/").status_code == 200
    assert admin_client.get("/metrics").status_code == 200
    assert admin_client.get("/health/?format=json").status_code in (200, 500)
    used = redis_client.info("commandstats")
    assert "cmdstat_scan" not in used, used.get("cmdstat_scan")
    assert "cmdstat_keys" not in used


def test_pages_walk_every_name_once(redis_client):
    for n in range(45):
        Lock(f"lock{n:02}", ttl=30).acquire()
    seen, cursor, pages = [], 0, 0
    while True:
        page = listings.lock_page(cursor, 10)
        seen += [lock.name for lock in page.items]
        pages += 1
        cursor = page.cursor
        if not cursor:
            break
    assert sorted(seen) == [f"lock{n:02}" for n in range(45)]
    assert pages == 5


def test_prune_forgets_what_is_gone_and_keeps_what_was_noted_meanwhile(redis_client, face):
    svc = face(registry)
    key = registry.registry_key("lock")
    old = time.time() - 3 * registry.NOTE_INTERVAL
    redis_client.zadd(key, {"gone": old, "held": old, "renoted": old, "recent": time.time()})
    Lock("held", ttl=30).acquire()  # noted again? its note is fresh: the ZADD is sent

    def alive(names):
        # "renoted" looks gone to the caller, but another process notes it meanwhile.
        redis_client.zadd(key, {"renoted": time.time()})
        return [name == "held" for name in names]

    assert svc.prune("lock", alive) == 1
    assert svc.names("lock") == ["held", "recent", "renoted"]


def test_names_pages_and_what_still_exists(redis_client, face):
    svc = face(registry)
    for name in ["delta", "alpha", "echo", "bravo", "charlie"]:
        svc.note("config", name)
    assert svc.names("config") == ["alpha", "bravo", "charlie", "delta", "echo"]
    first, cursor = svc.page("config", 0, 3)
    rest, end = svc.page("config", cursor, 3)
    assert (len(first), cursor, len(rest), end) == (3, 3, 2, 0)
    assert sorted(first + rest) == svc.names("config")

    def key_of(name: str) -> str:
        return make_key("config", "test", name)

    for name in ["alpha", "charlie"]:
        redis_client.set(key_of(name), "{}")
    old = time.time() - 3 * registry.NOTE_INTERVAL
    redis_client.zadd(registry.registry_key("config"), {"bravo": old, "delta": old})
    assert svc.existing("config", key_of) == ["alpha", "charlie"]
    # bravo and delta, gone and not noted for long, are forgotten; echo was noted just now
    assert svc.names("config") == ["alpha", "charlie", "echo"]
    assert svc.existing("config", key_of, ["echo"]) == []
    svc.forget("config", "echo")
    assert svc.names("config") == ["alpha", "charlie"]


def test_an_unknown_component_or_an_empty_page_is_refused_before_any_write(redis_client, face):
    svc = face(registry)
    with pytest.raises(InvalidArgument, match="invalid component 'bogus': must be one of lock"):
        svc.note("bogus", "name")
    with pytest.raises(InvalidArgument, match="invalid component"):
        svc.names("bogus")
    svc.note("config", "alpha")
    for cursor, count in [(0, 0), (0, -1), (0, 1001), (-1, 10)]:
        with pytest.raises(InvalidArgument, match=r"invalid (count|cursor)"):
            svc.page("config", cursor, count)
    with pytest.raises(InvalidArgumentType):
        svc.page("config", 0, "10")
    assert list(redis_client.scan_iter("*")) == [registry.registry_key("config").encode()]


def test_reading_a_listing_prunes_what_it_found_gone(redis_client):
    lock = Lock("brief", ttl=30)
    lock.acquire()
    lock.release()
    redis_client.zadd(registry.registry_key("lock"), {"brief": time.time() - 1000})
    assert held_locks() == []
    assert registry.names("lock") == []


def test_books_of_a_member_follow_joins_and_leaves(redis_client):
    AddressBook("knights").join("ann")
    AddressBook("archers").join_many(["ann", "bob", "Anna Lee: the second"])
    assert books_of("ann") == ["archers", "knights"]
    assert books_of("bob") == ["archers"]
    AddressBook("knights").leave("ann")
    assert books_of("ann") == ["archers"]
    # A set entry whose book no longer holds the member (a crash between the two writes).
    redis_client.sadd(make_key("ac", "bob", "books"), "ghosts")
    assert books_of("bob") == ["archers"]


def test_rebuild_registers_what_was_written_before_the_registries(redis_client):
    Lock("door", ttl=30).acquire()
    chat.create_chat("ann", ["bob"], "hello", chat_id="c1")
    config.set_config("logs", "web", {"level": 3})
    AddressBook("knights").join_many(["ann", "bob"])
    for component in registry.COMPONENTS:
        redis_client.delete(registry.registry_key(component))
    redis_client.delete(make_key("ac", "ann", "books"), make_key("ac", "bob", "books"))
    assert held_locks() == []
    assert books_of("ann") == []
    counts = registry.rebuild()
    assert counts["lock"] == 1
    assert counts["chat"] == 1
    assert counts["config"] == 1
    assert [lock.name for lock in held_locks()] == ["door"]
    assert listings.chat_page().items == ["c1"]
    call_command("rp_registry", "--rebuild", verbosity=0)
    assert listings.config_page().items == [("logs", "web")]
    assert books_of("ann") == books_of("bob") == ["knights"]


def _hold_and_check(seed: int, rounds: int) -> int:
    """Acquire fresh lock names, and while each is held, look for it in the registry."""
    registry.NOTE_INTERVAL = 0.02
    client = get_redis()
    missing = 0
    for n in range(rounds):
        lock = Lock(f"p{seed}-{n % 7}", ttl=5, client=client)
        lock.acquire(timeout=5)
        time.sleep(0.01)
        if client.zscore(registry.registry_key("lock"), lock.name) is None:
            missing += 1
        lock.release()
    return missing


def _prune_hard(seconds: float) -> int:
    registry.NOTE_INTERVAL = 0.02
    client = get_redis()
    deadline, forgotten = time.monotonic() + seconds, 0

    def alive(names):
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.exists(make_key("lock", name, "owner"))
        return [bool(found) for found in pipe.execute()] if names else []

    while time.monotonic() < deadline:
        forgotten += registry.prune("lock", alive, client=client)
    return forgotten


@pytest.mark.single_server
def test_a_held_lock_is_never_pruned_under_concurrent_pruning(redis_client):
    """Four processes take and hold locks while another prunes as hard as it can, with
    a note interval of 20 ms: a held lock's name is always in the registry."""
    results = run_in_processes(
        lambda role, arg: _hold_and_check(arg, 150) if role == "hold" else _prune_hard(arg),
        [("hold", seed) for seed in range(4)] + [("prune", 4.0)],
    )
    *missing, forgotten = results
    assert missing == [0, 0, 0, 0]
    assert forgotten > 0  # the pruner did forget released names meanwhile
