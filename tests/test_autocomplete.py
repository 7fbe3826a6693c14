import json
import os
import signal
import uuid

import pytest
import redis
from django.core.management import CommandError, call_command
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redisparts_app import keys
from redisparts_app.exceptions import (
    CompletionConflict,
    InvalidArgument,
)
from redisparts_app.services import autocomplete
from redisparts_app.services.autocomplete import (
    SENTINEL_MARK,
    AddressBook,
    RecentContacts,
    fold,
    matches,
    suggest,
    validate_name,
    validate_prefix,
    word_starts,
)
from tests.processes import CONTEXT, run_in_processes

pytestmark = pytest.mark.cluster

METHODS = ["lex", "book"]
# A server that is never reached: a call to it would raise ConnectionError, not bad input.
DEAD = redis.Redis(unix_socket_path="/nonexistent/redis.sock")


def sentinels_in(client: redis.Redis, key: str) -> list[bytes]:
    """Members holding the sentinel mark, found by a full scan of the zset."""
    return [member for member, _ in client.zscan_iter(key) if SENTINEL_MARK in member]


# --- recent contacts -------------------------------------------------------------------


def test_cap_holds_after_150_adds(redis_client, face):
    contacts = face(RecentContacts("ann"))
    for i in range(150):
        contacts.add(f"contact {i}")
    assert redis_client.llen(contacts.recent_key) == 100
    assert contacts.names() == [f"contact {i}" for i in range(149, 49, -1)]


@override_settings(REDISPARTS={"AUTOCOMPLETE_RECENT_MAX": 3})
def test_cap_comes_from_the_setting(redis_client, face):
    contacts = face(RecentContacts("ann"))
    for name in ["a", "b", "c", "d"]:
        contacts.add(name)
    assert contacts.names() == ["d", "c", "b"]


def test_readding_moves_to_front_without_duplicates(face):
    contacts = face(RecentContacts("ann"))
    for name in ["Bob", "Carol", "Dave", "Carol", "Bob"]:
        contacts.add(name)
    assert contacts.names() == ["Bob", "Carol", "Dave"]
    assert contacts.pick_count("Bob") == 2
    assert contacts.pick_count("Dave") == 1
    # Most picked first; equal counts in reverse byte order (ZREVRANGE).
    assert contacts.most_picked() == ["Carol", "Bob", "Dave"]


def test_remove_forgets_contact_and_its_picks(face):
    contacts = face(RecentContacts("ann"))
    contacts.add("Bob")
    contacts.add("Carol")
    assert contacts.remove("Bob") is True
    assert contacts.remove("Bob") is False
    assert contacts.names() == ["Carol"]
    assert contacts.pick_count("Bob") == 0


def test_prefix_filter_is_case_insensitive_for_any_script(face):
    contacts = face(RecentContacts("ann"))
    names = ["Émile Zola", "ÉLODIE", "李小龙", "Ζωή", "Алексей", "زهرا", "Anna Lee", "élan"]
    for name in reversed(names):
        contacts.add(name)
    assert contacts.names() == names
    assert contacts.complete("é") == ["Émile Zola", "ÉLODIE", "élan"]
    assert contacts.complete("EL") == ["ÉLODIE", "élan"]
    assert contacts.complete("zol") == ["Émile Zola"]
    assert contacts.complete("李") == ["李小龙"]
    assert contacts.complete("ΖΩ") == ["Ζωή"]
    assert contacts.complete("аЛе") == ["Алексей"]
    assert contacts.complete("زه") == ["زهرا"]
    assert contacts.complete("LEE") == ["Anna Lee"]
    assert contacts.complete("x") == []
    assert contacts.complete("", limit=2) == ["Émile Zola", "ÉLODIE"]


@override_settings(REDISPARTS={"AUTOCOMPLETE_PICKS_MAX": 3})
def test_pick_counts_keep_the_most_picked_and_the_last_pick(redis_client, face):
    contacts = face(RecentContacts("ann"))
    for name, times in [("b", 5), ("c", 4), ("d", 3)]:
        for i in range(times):
            assert contacts.add(name) == i + 1
    contacts.add("a")  # least picked, and first in byte order, yet kept: just picked
    assert redis_client.zcard(contacts.picks_key) == 3
    assert contacts.most_picked() == ["b", "c", "a"]
    assert contacts.pick_count("d") == 0


def _add_contacts(user: str, worker: int, rounds: int) -> int:
    contacts = RecentContacts(user)
    for i in range(rounds):
        contacts.add(f"friend {(i * 7 + worker) % 15}")
        RecentContacts(user).client.incr("test:adds")
    return rounds


@pytest.mark.slow
def test_concurrent_adds_never_duplicate_a_contact(redis_client):
    done = run_in_processes(_add_contacts, [("ann", w, 150) for w in range(4)])
    contacts = RecentContacts("ann")
    listed = contacts.names()
    assert sorted(listed) == sorted({f"friend {i}" for i in range(15)})
    picks = redis_client.zrange(contacts.picks_key, 0, -1, withscores=True)
    assert sum(score for _, score in picks) == sum(done) == int(redis_client.get("test:adds"))


# --- address book ----------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_folded_and_word_start_matches(method, face):
    raw = AddressBook("knights", method=method)
    book = face(raw)
    for name in ["Hôtel", "hot dog", "李小龙", "李", "Anna Lee", "Zoë", "Zoey", "Ömer"]:
        book.join(name)
    assert book.complete("hot") == ["hot dog", "Hôtel"]
    assert book.complete("李") == ["李", "李小龙"]
    assert book.complete("lee") == ["Anna Lee"]
    assert book.complete("ZOË") == ["Zoë", "Zoey"]
    assert book.complete("zoey") == ["Zoey"]
    assert book.complete("o") == ["Ömer"]
    assert book.complete("nothing") == []


@pytest.mark.parametrize("method", METHODS)
def test_order_is_folded_form_then_as_written_and_limit_defaults_to_10(method, face):
    raw = AddressBook("knights", method=method)
    book = face(raw)
    raw.join_many(["zoe", "Zoë", "ZOE", "Zoe Adams"] + [f"zz {i:02}" for i in range(20)])
    assert book.complete("zo") == ["ZOE", "Zoë", "zoe", "Zoe Adams"]
    assert book.complete("z") == ["ZOE", "Zoë", "zoe", "Zoe Adams"] + [
        f"zz {i:02}" for i in range(6)
    ]
    assert book.complete("zz", limit=3) == ["zz 00", "zz 01", "zz 02"]


@pytest.mark.parametrize("method", METHODS)
def test_a_name_matching_on_two_words_is_listed_once(method, face):
    raw = AddressBook("knights", method=method)
    book = face(raw)
    raw.join_many(["Anna Anna", "Ann", "Annie Anderson", "Bob"])
    # Ordered by the matching entry: "anderson" < "ann" < "anna" < "anna anna" < "annie ..."
    assert book.complete("an", limit=3) == ["Annie Anderson", "Ann", "Anna Anna"]
    assert book.complete("AND") == ["Annie Anderson"]


@pytest.mark.parametrize("method", METHODS)
def test_a_name_whose_folded_form_gains_a_word_is_listed_once(method, face):
    raw = AddressBook("knights", method=method)
    book = face(raw)
    # NFKD turns the diaeresis "¨" into a space and a combining mark: "bo¨bo" folds to
    # "bo bo", two word starts for "bo" though the name as written has no space.
    raw.join_many(["Bo¨bo", "Bob"])
    assert fold("Bo¨bo") == "bo bo"
    assert book.complete("bo") == ["Bo¨bo", "Bob"]
    assert book.complete("BO", limit=2) == ["Bo¨bo", "Bob"]
    assert book.complete("b", limit=1) == ["Bo¨bo"]


@pytest.mark.parametrize("method", METHODS)
def test_duplicates_and_residue_beyond_one_page_are_skipped(method, redis_client, face):
    raw = AddressBook("knights", method=method)
    book = face(raw)
    repeated = " ".join(["ab"] * 30)  # 30 entries starting with "ab", one name
    raw.join_many([repeated, "abc", "abd"])
    for _ in range(20):
        token = SENTINEL_MARK + uuid.uuid4().hex.encode()
        redis_client.zadd(book.index_key, {b"ab" + token: 0, b"ab\xff" + token: 0})
    assert book.complete("ab", limit=3) == [repeated, "abc", "abd"]
    assert book.complete("a", limit=2) == [repeated, "abc"]
    assert book.conflicts == 0


def test_join_and_leave_keep_index_and_names_in_step(redis_client, face):
    raw = AddressBook("knights")
    book = face(raw)
    assert book.join("Anna Lee") is True
    assert book.join("Anna Lee") is False
    assert book.join("a:b {c}") is True  # key syntax in a name is only data
    assert "Anna Lee" in raw
    assert len(raw) == 2
    assert redis_client.zcard(book.index_key) == 4
    assert book.leave("Anna Lee") is True
    assert book.leave("Anna Lee") is False
    assert book.complete("lee") == []
    assert book.complete("{c") == ["a:b {c}"]
    assert book.leave("a:b {c}") is True
    assert redis_client.exists(book.index_key, book.names_key) == 0


def test_guild_and_user_keys_share_their_slot():
    book = AddressBook("knights")
    contacts = RecentContacts("ann")
    assert keys.slot_of(book.index_key) == keys.slot_of(book.names_key)
    assert keys.slot_of(contacts.recent_key) == keys.slot_of(contacts.picks_key)


# Names drawn from scripts that fold differently, with shared prefixes and mixed case.
TRICKY = ["Hôtel", "hotel", "HOTEL", "Zoë", "ZOË", "Straße", "strasse", "İstanbul", "ǅemal",
          "李小龙", "李", "小李", "محمد رضا", "می‌خواهم", "Ελένη", "😀 smile", "👨‍👩‍👧 family",
          "Anna Lee", "anna", "Åsa Öberg", "\uff21\uff4e\uff4e\uff41", "x", "ﬁne",
          "ガギ"]  # fmt: skip
LETTERS = "aAbBeEéÉëËzZ oOöÖ李小😀ßſİıǅ\u0301\u200d"


def _valid(name: str) -> bool:
    try:
        return validate_name(name) == name
    except ValueError:
        return False


names_strategy = st.one_of(
    st.sampled_from(TRICKY),
    st.text(alphabet=LETTERS, min_size=1, max_size=6),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=5),
).filter(_valid)


def model_complete(names: set[str], prefix: str, limit: int) -> list[str]:
    """The expected answer, from the documented index layout, without Redis."""
    query = validate_prefix(prefix).encode()
    entries = sorted(
        start.encode() + b"\x00" + name.encode()
        for name in names
        for start in word_starts(fold(name))
    )
    found: list[str] = []
    for entry in entries:
        name = entry.split(b"\x00", 1)[1].decode()
        if entry.startswith(query) and name not in found:
            found.append(name)
    return found[:limit]


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_lex_and_book_give_identical_results_on_random_unicode_names(redis_client, data):
    names = data.draw(st.sets(names_strategy, max_size=25), label="names")
    guild = f"g{uuid.uuid4().hex}"
    lex = AddressBook(guild, method="lex")
    book = AddressBook(guild, method="book")
    lex.join_many(names)
    # Residue of killed book lookups must change nothing.
    for residue in data.draw(st.lists(st.sampled_from(["", "a", "z", "李", "ho"]), max_size=2)):
        token = SENTINEL_MARK + uuid.uuid4().hex.encode()
        q = validate_prefix(residue).encode()
        redis_client.zadd(lex.index_key, {q + token: 0, q + b"\xff" + token: 0})
    real_prefixes = st.sampled_from(sorted(names)).flatmap(
        lambda name: st.integers(0, len(name)).map(lambda n: name[:n])
    )
    any_prefix = st.text(alphabet=LETTERS, max_size=3)
    for _ in range(3):
        prefix = data.draw(real_prefixes if names else any_prefix, label="prefix")
        other = data.draw(any_prefix, label="other prefix")
        limit = data.draw(st.integers(1, 12), label="limit")
        for query in (prefix, other):
            expected = model_complete(names, query, limit)
            assert lex.complete(query, limit) == expected
            assert book.complete(query, limit) == expected
        if prefix and names:
            assert any(matches(n, validate_prefix(prefix)) for n in book.complete(prefix, 25))
    assert book.conflicts == 0
    redis_client.delete(lex.index_key, lex.names_key)


# --- the book method under failures and concurrency ------------------------------------


def _lookup_then_hang(guild: str, ready_list: str) -> None:
    book = AddressBook(guild, method="book")

    def hang() -> None:
        book.client.rpush(ready_list, os.getpid())
        signal.pause()  # killed here, between adding and removing the sentinels

    book.complete("an", on_sentinels=hang)


@pytest.mark.slow
def test_a_client_killed_mid_lookup_leaves_no_visible_sentinel(redis_client):
    guild = "knights"
    names = ["Ann", "Anna Lee", "Andrew", "Bob", "Zed Anders"]
    AddressBook(guild).join_many(names)
    child = CONTEXT.Process(target=_lookup_then_hang, args=(guild, "test:ready"), daemon=True)
    child.start()
    try:
        popped = redis_client.blpop(["test:ready"], timeout=30)
        assert popped is not None, "the lookup never reached its sentinels"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(10)
    assert child.exitcode == -signal.SIGKILL
    book = AddressBook(guild, method="book")
    assert len(sentinels_in(redis_client, book.index_key)) == 2  # the residue is really there
    for method in METHODS:
        lookup = AddressBook(guild, method=method)
        assert lookup.complete("an") == ["Zed Anders", "Andrew", "Ann", "Anna Lee"]
        assert lookup.complete("an", limit=2) == ["Zed Anders", "Andrew"]
        assert lookup.complete("") == ["Zed Anders", "Andrew", "Ann", "Anna Lee", "Bob"]
    # Purging spares young sentinels (a lookup may be running) and deletes old ones.
    assert book.purge_sentinels(older_than=60) == 0
    later = AddressBook(guild, clock=lambda: book.clock() + 61)
    assert later.purge_sentinels(older_than=60) == 2
    assert sentinels_in(redis_client, book.index_key) == []


def test_watch_conflict_is_retried_and_sees_the_write(redis_client, face):
    raw = AddressBook("knights", method="book")
    book = face(raw)
    raw.join_many(["Ann", "Bob"])
    writer = AddressBook("knights")  # another connection of the pool

    def write_once(attempt: int) -> None:
        if attempt == 1:
            writer.join("Anna")

    assert book.complete("an", on_watched=write_once) == ["Ann", "Anna"]
    assert book.conflicts == 1
    assert sentinels_in(redis_client, book.index_key) == []


def test_conflicts_on_every_attempt_raise_and_remove_the_sentinels(redis_client, face):
    raw = AddressBook("knights", method="book", max_attempts=3)
    book = face(raw)
    book.join("Ann")
    writer = AddressBook("knights")
    attempts = []

    def always_write(attempt: int) -> None:
        attempts.append(attempt)
        writer.join(f"Ann {attempt}")

    with pytest.raises(CompletionConflict, match="3 lookups"):
        book.complete("an", on_watched=always_write)
    assert attempts == [1, 2, 3]
    assert sentinels_in(redis_client, book.index_key) == []


def test_sentinels_purged_mid_lookup_are_put_back(redis_client, face):
    raw = AddressBook("knights", method="book")
    book = face(raw)
    raw.join_many(["Ann", "Anna", "Bob"])
    purged = []

    def purge() -> None:
        purged.append(raw.purge_sentinels(older_than=-10))

    assert book.complete("an", on_sentinels=purge) == ["Ann", "Anna"]
    assert purged == [2]
    assert sentinels_in(redis_client, book.index_key) == []


STABLE = [f"ab {i}" for i in range(5)]


def _write_members(guild: str, worker: int, rounds: int) -> int:
    book = AddressBook(guild)
    for i in range(rounds):
        name = f"ab w{worker} {i:03}"
        book.join(name)
        book.leave(name)
    book.client.incr("test:writers_done")
    return rounds


def _read_members(guild: str, method: str, rounds: int) -> tuple[int, int, list]:
    """Look up until both writers are done (at least ``rounds`` times); return what failed."""
    book = AddressBook(guild, method=method, max_attempts=1000)
    bad = []
    done = 0
    while done < rounds or int(book.client.get("test:writers_done") or 0) < 2:
        done += 1
        found = book.complete("AB", limit=20)
        transient = [name for name in found if name not in STABLE]
        expected_order = model_complete(set(found), "ab", 20)
        if (
            not set(STABLE) <= set(found)
            or len(transient) > 2
            or not all(name.startswith("ab w") for name in transient)
            or found != expected_order
        ):
            bad.append(found)
        book.client.incr("test:lookups")
    return done, book.conflicts, bad


@pytest.mark.slow
def test_book_lookups_stay_correct_with_writers_in_other_processes(redis_client):
    guild = "knights"
    AddressBook(guild).join_many(STABLE)
    tasks = [("w", 0, 150), ("w", 1, 150), ("r", "book", 30), ("r", "book", 30), ("r", "lex", 30)]
    results = run_in_processes(_dispatch, [(guild, *task) for task in tasks])
    readers = results[2:]
    assert [bad for _, _, bad in readers] == [[], [], []]
    assert int(redis_client.get("test:lookups")) == sum(done for done, _, _ in readers)
    assert int(redis_client.get("test:writers_done")) == 2
    book = AddressBook(guild)
    assert sentinels_in(redis_client, book.index_key) == []
    assert sorted(redis_client.hkeys(book.names_key)) == [n.encode() for n in STABLE]
    assert redis_client.zcard(book.index_key) == 2 * len(STABLE)


def _dispatch(guild: str, role: str, arg, rounds: int):
    if role == "w":
        return _write_members(guild, arg, rounds)
    return _read_members(guild, arg, rounds)


# --- combined suggestions --------------------------------------------------------------


def test_suggest_merges_recent_then_guild_then_most_picked(face):
    contacts = RecentContacts("ann")
    for name in ["Alma", "Albert", "Alma", "Alice Cooper", "Zed"]:
        contacts.add(name)
    contacts.remove("Alma")  # forgotten, so only a guild member now
    for _ in range(3):
        contacts.add("Alfred")
    contacts.client.ltrim(contacts.recent_key, 1, -1)  # Alfred drops out of the recent list
    book = AddressBook("knights")
    book.join_many(["Alma", "Albert", "Alan", "Bob"])
    assert contacts.names() == ["Zed", "Alice Cooper", "Albert"]
    svc = face(autocomplete)
    assert svc.suggest("ann", "knights", "al") == [
        "Alice Cooper",
        "Albert",
        "Alan",
        "Alma",
        "Alfred",
    ]
    assert svc.suggest("ann", "knights", "AL", limit=3) == ["Alice Cooper", "Albert", "Alan"]
    assert svc.suggest("ann", "knights", "coo", method="book") == ["Alice Cooper"]


# --- Redis Cluster -------------------------------------------------------------------


def test_guilds_spread_over_the_slots_complete_with_both_methods():
    guilds = ["knights", "mages", "thieves", "bards", "monks", "druids"]
    slots = {keys.slot_of(AddressBook(g, client=DEAD).index_key) // 5462 for g in guilds}
    assert len(slots) == 3  # the guilds live on every primary
    for guild in guilds:
        AddressBook(guild).join_many(["Hôtel", "Anna Lee", "李小龙", "Zoë", "Zoey"])
        for method in METHODS:
            book = AddressBook(guild, method=method)
            assert book.complete("ZOË") == ["Zoë", "Zoey"]
            assert book.complete("lee") == ["Anna Lee"]
        assert AddressBook(guild).leave("Zoey") is True
    contacts = RecentContacts("ann")
    for name in ["Hôtel", "Zoë", "Hôtel"]:
        contacts.add(name)
    assert contacts.names() == ["Hôtel", "Zoë"]
    assert suggest("ann", "knights", "z", method="book") == ["Zoë"]
    assert suggest("ann", "knights", "", limit=3) == ["Hôtel", "Zoë", "Anna Lee"]
    # The book method's WATCH runs on the primary of the guild's slot.
    book = AddressBook("mages", method="book")
    writer = AddressBook("mages")

    def write_once(attempt: int) -> None:
        if attempt == 1:
            writer.join("Zed")

    assert book.complete("z", on_watched=write_once) == ["Zed", "Zoë"]
    assert book.conflicts == 1
    assert sentinels_in(book.client, book.index_key) == []


# --- bad input -------------------------------------------------------------------------

BAD_KEY_PARTS = ["", "x" * 201, "a\x00b", "a\nb", "tab\there", "{g}", "g:1", "a}", " lead"]


@pytest.mark.parametrize("value", BAD_KEY_PARTS)
def test_bad_guild_or_user_is_refused_before_any_redis_call(value):
    with pytest.raises(InvalidArgument):
        AddressBook(value, client=DEAD)
    with pytest.raises(InvalidArgument):
        RecentContacts(value, client=DEAD)
    with pytest.raises(InvalidArgument):
        suggest(value, "knights", "a", client=DEAD)
    with pytest.raises(InvalidArgument):
        suggest("ann", value, "a", client=DEAD)


BAD_NAMES = ["", " ", "x" * 201, "a\x00b", "line\nbreak", "bell\x07", "zero\u200bwidth",
             "\u0301", " lead", "trail ", "priv\ue000ate"]  # fmt: skip


@pytest.mark.parametrize("value", BAD_NAMES)
def test_bad_names_are_refused_before_any_redis_call(value, redis_client):
    book = AddressBook("knights", client=DEAD)
    contacts = RecentContacts("ann", client=DEAD)
    for call in (book.join, book.leave, contacts.add, contacts.remove):
        with pytest.raises(InvalidArgument, match=r"invalid (member|contact)"):
            call(value)
    with pytest.raises(InvalidArgument):
        AddressBook("knights", client=DEAD).join_many(["fine", value])
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize("prefix", ["x" * 201, "a\x00", "\n", "\x1b[1m"])
def test_bad_prefixes_are_refused(prefix):
    for method in METHODS:
        with pytest.raises(InvalidArgument, match="invalid prefix"):
            AddressBook("knights", method=method, client=DEAD).complete(prefix)
    with pytest.raises(InvalidArgument):
        RecentContacts("ann", client=DEAD).complete(prefix)


def test_prefixes_are_checked_again_once_the_settings_change(face):
    book = face(AddressBook("knights"))
    book.join("Abcdef")
    assert book.complete("abcdef") == ["Abcdef"]
    shorter = override_settings(REDISPARTS={"AUTOCOMPLETE_NAME_MAX_LENGTH": 5})
    with shorter, pytest.raises(InvalidArgument, match="invalid prefix"):
        book.complete("abcdef")
    assert book.complete("abcdef") == ["Abcdef"]


def test_the_cache_of_prefixes_stays_bounded(monkeypatch, face):
    monkeypatch.setattr(autocomplete._queries, "limit", 3)
    book = face(AddressBook("knights"))
    book.join("Abcdef")
    for prefix in ["a", "ab", "ABC", "abcd", "Abcde", "a", "ab"]:
        assert book.complete(prefix) == ["Abcdef"]
        assert len(autocomplete._queries) <= 3


@pytest.mark.parametrize("limit", [0, -1, 1001, "3", 2.5, True])
def test_bad_limits_are_refused(limit):
    with pytest.raises(InvalidArgument):
        AddressBook("knights", client=DEAD).complete("a", limit)
    with pytest.raises(InvalidArgument):
        suggest("ann", "knights", "a", limit, client=DEAD)


def test_non_strings_and_unknown_methods_are_refused():
    with pytest.raises(TypeError):
        AddressBook("knights", client=DEAD).join(42)
    with pytest.raises(InvalidArgument, match=r"invalid method .scan.: must be one of lex, book"):
        AddressBook("knights", method="scan", client=DEAD)
    with pytest.raises(InvalidArgument, match="max_attempts"):
        AddressBook("knights", method="book", max_attempts=0, client=DEAD)
    with pytest.raises(InvalidArgument, match="max_size"):
        RecentContacts("ann", max_size=-1, client=DEAD)


# --- management command ----------------------------------------------------------------


def test_command_loads_a_file_and_answers_a_query(tmp_path, capsys):
    names = tmp_path / "names.txt"
    names.write_text("Hôtel\nAnna Lee\n\n李小龙\nZoë\n", encoding="utf-8")
    call_command("rp_autocomplete", "knights", "--load", str(names), verbosity=0)
    assert len(AddressBook("knights")) == 4
    assert "Loaded 4 names" in capsys.readouterr().out
    call_command("rp_autocomplete", "knights", "--query", "LEE", "--json", "--method", "book")
    assert json.loads(capsys.readouterr().out) == {"completions": ["Anna Lee"]}


def test_command_refuses_a_file_with_bad_lines_and_loads_nothing(tmp_path, redis_client):
    names = tmp_path / "names.txt"
    names.write_text("Ann\nbad\x07name\nBob\n", encoding="utf-8")
    with pytest.raises(CommandError, match="line 2") as failure:
        call_command("rp_autocomplete", "knights", "--load", str(names))
    assert failure.value.returncode == 2
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["knights"],
        ["kni:ghts", "--query", "a"],
        ["knights", "--load", "/nonexistent/names.txt"],
        ["knights", "--query", "a", "--limit", "0"],
    ],
)
def test_command_reports_bad_arguments_with_exit_status_2(argv):
    with pytest.raises(CommandError) as failure:
        call_command("rp_autocomplete", *argv)
    assert failure.value.returncode == 2


def test_command_purges_old_sentinels_and_prints_names(redis_client, capsys):
    book = AddressBook("knights")
    book.join_many(["Ann", "Anna Lee"])
    token = SENTINEL_MARK + b"1000-dead"  # stamped in 1970: residue of a killed lookup
    redis_client.zadd(book.index_key, {b"an" + token: 0, b"an\xff" + token: 0})
    call_command("rp_autocomplete", "knights", "--purge-sentinels", "60", "--query", "AN")
    assert capsys.readouterr().out.splitlines() == ["Purged 2 sentinel(s).", "Ann", "Anna Lee"]
    assert sentinels_in(redis_client, book.index_key) == []


def test_command_stops_cleanly_on_ctrl_c(tmp_path, monkeypatch):
    names = tmp_path / "names.txt"
    names.write_text("\n".join(f"name {i}" for i in range(1200)), encoding="utf-8")
    join_many = AddressBook.join_many
    batches = []

    def interrupted_after_one_batch(self, batch):
        if batches:
            raise KeyboardInterrupt
        batches.append(len(batch))
        return join_many(self, batch)

    monkeypatch.setattr(AddressBook, "join_many", interrupted_after_one_batch)
    with pytest.raises(CommandError, match="interrupted: 500 of 1200 names loaded") as failure:
        call_command("rp_autocomplete", "knights", "--load", str(names), verbosity=0)
    assert failure.value.returncode == 130
    assert len(AddressBook("knights")) == 500


def test_command_reports_an_unreachable_redis_with_exit_status_3():
    dead = {"default": {"URL": "unix:///nonexistent/redis.sock"}}
    with (
        override_settings(REDISPARTS={"CONNECTIONS": dead}),
        pytest.raises(CommandError, match="cannot reach Redis") as failure,
    ):
        call_command("rp_autocomplete", "knights", "--query", "a")
    assert failure.value.returncode == 3
