import pytest
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from redisparts_app.exceptions import InvalidArgument
from redisparts_app.keys import (
    FORBIDDEN_CHARACTERS,
    component_pattern,
    make_key,
    scan_keys,
    slot_of,
    validate_key_part,
)

HOSTILE_PARTS = [
    ("", "must not be empty"),
    ("a{b", "'{'"),
    ("a}b", "'}'"),
    ("user:42", "':'"),
    ("*", "'*'"),
    ("guild?", "'?'"),
    ("[abc]", "'['"),
    ("back\\slash", "'\\\\'"),
    ("line\nbreak", "control or whitespace"),
    ("tab\there", "control or whitespace"),
    ("nul\x00", "control or whitespace"),
    ("zero\u200bwidth", "control or whitespace"),
    ("x" * 10_000, "longer than 200 characters"),
    (" padded", "start or end with a space"),
]


@pytest.mark.parametrize(("value", "reason"), HOSTILE_PARTS)
def test_hostile_key_part_is_refused_with_its_reason(value, reason):
    with pytest.raises(InvalidArgument, match="invalid guild") as excinfo:
        validate_key_part(value, "guild")
    assert reason in str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)
    assert len(str(excinfo.value)) < 200  # a 10,000-character value is not echoed in full


@pytest.mark.parametrize("value", [42, None, b"bytes"])
def test_non_string_key_part_is_a_type_error(value):
    with pytest.raises(TypeError, match=r"invalid user .*: must be a string"):
        validate_key_part(value, "user")


@pytest.mark.parametrize(
    "value", ["alice", "Zoë", "张伟", "Anna Lee", "🦊 fox", "ناهید", "a.b-c_d"]
)
def test_ordinary_unicode_names_are_accepted(value):
    assert validate_key_part(value) == value


def test_key_part_is_normalized_to_nfc():
    decomposed = "Zoe\u0308"
    assert validate_key_part(decomposed) == "Zoë"


def test_refusal_happens_before_any_redis_call(redis_client):
    before = redis_client.info("commandstats")
    with pytest.raises(InvalidArgument):
        make_key("chat", validate_key_part("evil}:*", "chat"), "members")
    after = redis_client.info("commandstats")
    # Only the INFO calls themselves were counted in between.
    assert {k: v["calls"] for k, v in after.items() if k != "cmdstat_info"} == {
        k: v["calls"] for k, v in before.items() if k != "cmdstat_info"
    }


@given(st.text(min_size=1, max_size=50))
def test_every_accepted_part_is_free_of_key_syntax(value):
    try:
        part = validate_key_part(value)
    except InvalidArgument:
        return
    assert not FORBIDDEN_CHARACTERS & set(part)
    key = make_key("chat", part, "messages")
    # The only braces in the key are the hash tag's own, so the tag decides the slot.
    assert key.count("{") == key.count("}") == 1
    assert slot_of(key) == slot_of(make_key("chat", part, "members"))


def test_make_key_layout_and_shared_slot():
    assert make_key("sem", "reports", "holders") == "rp:sem:{reports}:holders"
    assert slot_of("rp:sem:{reports}:holders") == slot_of("rp:sem:{reports}:counter")


@override_settings(REDISPARTS={"KEY_PREFIX": "shop"})
def test_prefix_comes_from_settings():
    assert make_key("lock", "market") == "shop:lock:{market}"
    assert component_pattern("lock") == "shop:lock:*"


@pytest.mark.parametrize(
    ("component", "tag", "roles"),
    [("Lock", "t", ()), ("lock", "", ()), ("lock", "a{b", ()), ("lock", "t", ("x}",))],
)
def test_make_key_refuses_malformed_parts(component, tag, roles):
    with pytest.raises(ValueError, match="must be"):
        make_key(component, tag, *roles)


def test_scan_keys_finds_a_component_without_keys_command(redis_client):
    for i in range(1200):
        redis_client.set(make_key("lock", f"item{i}"), 1)
    redis_client.set("other:key", 1)
    found = set(scan_keys(redis_client, component_pattern("lock")))
    assert len(found) == 1200
    assert b"other:key" not in found
    assert redis_client.info("commandstats").get("cmdstat_keys") is None
