"""The shared argument checks: what they accept, what they refuse, and the error they raise."""

import math

import pytest

from redisparts_app.exceptions import InvalidArgument, InvalidArgumentType, RedisPartsError
from redisparts_app.validation import (
    check_choice,
    check_count,
    check_int,
    check_key_part,
    check_number,
    check_optional_count,
    check_page_size,
    check_seconds,
    check_text,
    to_ms,
)


def test_invalid_argument_carries_field_value_and_reason():
    error = InvalidArgument("limit", 0, "must be an integer from 1 to 10")
    assert (error.field, error.value, error.reason) == (
        "limit",
        0,
        "must be an integer from 1 to 10",
    )
    assert str(error) == "invalid limit 0: must be an integer from 1 to 10"
    assert isinstance(error, ValueError)
    assert isinstance(error, RedisPartsError)


def test_invalid_argument_can_leave_the_value_out_of_the_message():
    error = InvalidArgument("body", "private text", "must not be empty", show_value=False)
    assert str(error) == "invalid body: must not be empty"
    assert error.value == "private text"


def test_a_huge_value_is_shortened_in_the_message():
    error = InvalidArgument("name", "x" * 10_000, "too long")
    assert len(str(error)) < 120


def test_wrong_types_are_both_type_and_value_errors():
    with pytest.raises(InvalidArgumentType) as caught:
        check_int("3", "limit")
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, InvalidArgument)


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None])
def test_check_int_refuses_non_integers_and_booleans(value):
    with pytest.raises(InvalidArgumentType, match="invalid count"):
        check_int(value, "count")


def test_check_int_applies_the_bounds():
    assert check_int(5, "n", minimum=5, maximum=5) == 5
    with pytest.raises(InvalidArgument, match="must be an integer from 1 to 3"):
        check_int(4, "n", minimum=1, maximum=3)
    with pytest.raises(InvalidArgument, match="of at least 0"):
        check_int(-1, "n", minimum=0)
    with pytest.raises(InvalidArgument, match="of at most 2"):
        check_int(3, "n", maximum=2)


def test_counts_start_at_one():
    assert check_count(1, "n") == 1
    with pytest.raises(InvalidArgument):
        check_count(0, "n")
    with pytest.raises(InvalidArgument):
        check_count(11, "n", maximum=10)
    assert check_optional_count(None, "n") is None
    assert check_optional_count(2, "n") == 2


def test_page_size_uses_the_default_for_none():
    assert check_page_size(None, maximum=100, default=20) == 20
    assert check_page_size(100, maximum=100) == 100
    with pytest.raises(InvalidArgument, match="invalid limit 101"):
        check_page_size(101, maximum=100)


@pytest.mark.parametrize(
    ("value", "allow_zero"),
    [(0, False), (-1, True), (True, False), ("5", False), (None, False), (math.nan, True),
     (math.inf, True), (0.0001, False), (1e30, False)],
)  # fmt: skip
def test_bad_seconds_are_refused(value, allow_zero):
    with pytest.raises(InvalidArgument, match="ttl"):
        check_seconds(value, "ttl", allow_zero=allow_zero)


def test_good_seconds_are_floats():
    assert check_seconds(2, "ttl") == 2.0
    assert check_seconds(0, "timeout", allow_zero=True) == 0.0
    assert check_seconds(0.0001, "timeout", whole_ms=False) == 0.0001
    with pytest.raises(InvalidArgument, match="at most 10 seconds"):
        check_seconds(11, "timeout", maximum=10)


def test_to_ms_never_rounds_a_positive_duration_to_zero():
    assert to_ms(0.0001) == 1
    assert to_ms(1.5) == 1500
    assert to_ms(0) == 0


def test_check_number_refuses_non_finite_and_out_of_range():
    assert check_number(3, "value") == 3.0
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(InvalidArgument, match="finite"):
            check_number(bad, "value")
    with pytest.raises(InvalidArgument, match="at least 0"):
        check_number(-0.5, "seconds", minimum=0)
    with pytest.raises(InvalidArgumentType):
        check_number(True, "value")


def test_check_choice_lists_the_choices():
    assert check_choice("lex", "method", ("lex", "book")) == "lex"
    with pytest.raises(InvalidArgument, match="must be one of lex, book"):
        check_choice("scan", "method", ("lex", "book"))


def test_check_text_normalises_and_does_not_quote_the_text():
    assert check_text("Cafe\u0301", "body", 10) == "Café"
    assert check_text("a\nb", "body", 10) == "a\nb"
    with pytest.raises(InvalidArgument, match="control character U") as caught:
        check_text("a\nsecret", "subject", 20, multiline=False)
    assert "secret" not in str(caught.value)
    with pytest.raises(InvalidArgument, match="must not be empty"):
        check_text("  ", "body", 10)
    with pytest.raises(InvalidArgument, match="shorten it to at most 3"):
        check_text("abcd", "body", 3)
    with pytest.raises(InvalidArgumentType):
        check_text(b"bytes", "body", 10)


@pytest.mark.parametrize("value", ["", "a:b", "{t}", "x*", " pad", "tab\there", "x" * 1000])
def test_check_key_part_refuses_what_could_break_a_key(value):
    with pytest.raises(InvalidArgument, match="invalid user"):
        check_key_part(value, "user")


def test_check_key_part_returns_nfc():
    assert check_key_part("Cafe\u0301", "user") == "Café"
    assert check_key_part("anna lee", "user") == "anna lee"
    assert check_key_part("Cafe\u0301", "chat") == "Café"  # the second time from the cache


def test_a_key_part_found_valid_is_checked_again_under_new_settings(settings):
    name = "x" * 30
    assert check_key_part(name, "user") == name
    settings.REDISPARTS = {"MAX_KEY_PART_LENGTH": 20}
    with pytest.raises(InvalidArgument, match="longer than 20 characters"):
        check_key_part(name, "user")


def test_a_refused_key_part_is_refused_every_time():
    for _ in range(2):
        with pytest.raises(InvalidArgument, match="invalid item"):
            check_key_part("a:b", "item")
