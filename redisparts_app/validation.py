"""Checks of caller-supplied arguments, run before anything reaches Redis.

Import: ``from redisparts_app.validation import check_int, check_seconds``.

Every check returns the accepted value (normalised where it says so) or raises
InvalidArgument (a ValueError) naming the field, the value and what would be
accepted; a value of the wrong type raises InvalidArgumentType, which is also a
TypeError. Booleans are never accepted as numbers.
"""

import math
import re
import unicodedata
from collections.abc import Collection
from typing import TypeVar

from .conf import SettingsCache, app_settings
from .exceptions import InvalidArgument, InvalidArgumentType

__all__ = [
    "MAX_SECONDS",
    "check_choice",
    "check_count",
    "check_int",
    "check_key_part",
    "check_number",
    "check_optional_count",
    "check_page_size",
    "check_seconds",
    "check_text",
    "check_token",
    "to_ms",
]

# The longest duration Redis takes in one PX argument without overflow worries (~292 years).
MAX_SECONDS = 2**53 / 1000
# Key syntax (separator, hash-tag braces) and glob characters used by SCAN MATCH.
FORBIDDEN_KEY_CHARACTERS = frozenset(":{}*?[]\\")
# Unicode categories refused in key parts: controls, format, surrogates, private use,
# unassigned, line and paragraph separators.
FORBIDDEN_KEY_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Line breaks and tabs are text in a multi-line field; other controls are not.
_TEXT_CONTROLS_ALLOWED = frozenset("\n\r\t")

_T = TypeVar("_T")
# A lock's owner token or a semaphore permit's holder id: os.urandom(16).hex().
_TOKEN_RE = re.compile(r"[0-9a-f]{32}")


def _describe_range(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an integer from {minimum} to {maximum}"
    if minimum is not None:
        return f"an integer of at least {minimum}"
    if maximum is not None:
        return f"an integer of at most {maximum}"
    return "an integer"


def check_int(
    value: object, field: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Return ``value`` if it is an int (not a bool) within ``minimum``..``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentType(
            field,
            value,
            f"must be {_describe_range(minimum, maximum)}, got {type(value).__name__}",
        )
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise InvalidArgument(field, value, f"must be {_describe_range(minimum, maximum)}")
    return value


def check_count(value: object, field: str, *, maximum: int | None = None) -> int:
    """Return ``value`` if it is a whole number of at least 1 (and at most ``maximum``)."""
    return check_int(value, field, minimum=1, maximum=maximum)


def check_optional_count(value: object, field: str, *, maximum: int | None = None) -> int | None:
    """Return None for None, else ``value`` checked as by check_count()."""
    return None if value is None else check_count(value, field, maximum=maximum)


def check_page_size(
    value: object, field: str = "limit", *, maximum: int, default: int | None = None
) -> int:
    """Return the page size ``value`` (``default`` when None): an int from 1 to ``maximum``."""
    if value is None and default is not None:
        value = default
    if type(value) is int and 1 <= value <= maximum:
        return value  # the common case, which check_int lets through
    return check_int(value, field, minimum=1, maximum=maximum)


def check_number(
    value: object, field: str, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    """Return ``value`` as a float if it is a finite number within ``minimum``..``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentType(field, value, f"must be a number, got {type(value).__name__}")
    number = float(value)
    low = "" if minimum is None else f" of at least {minimum:g}"
    high = "" if maximum is None else f"{' and' if low else ' of'} at most {maximum:g}"
    if (
        not math.isfinite(number)
        or (minimum is not None and number < minimum)
        or (maximum is not None and number > maximum)
    ):
        raise InvalidArgument(field, value, f"must be a finite number{low}{high}")
    return number


def check_seconds(
    value: object,
    field: str,
    *,
    allow_zero: bool = False,
    maximum: float = MAX_SECONDS,
    whole_ms: bool = True,
) -> float:
    """Return ``value`` as float seconds, or raise InvalidArgument.

    Refuse booleans, non-numbers, NaN, infinities, negatives, zero unless
    ``allow_zero``, values above ``maximum`` and, when ``whole_ms`` (Redis counts
    milliseconds), positive values under one millisecond.
    """
    kind = type(value)
    # The common case first, which every check below lets through (no call in it: this
    # runs several times per lock or semaphore use).
    if (kind is float or kind is int) and (
        0.001 <= value <= maximum  # type: ignore[operator]
        or (value == 0 and allow_zero)
    ):
        return float(value)  # type: ignore[arg-type]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentType(
            field, value, f"must be a number of seconds, got {type(value).__name__}"
        )
    seconds = float(value)
    bound = "zero or more" if allow_zero else "more than zero"
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise InvalidArgument(field, value, f"must be {bound} and at most {maximum:g} seconds")
    if seconds > maximum:
        raise InvalidArgument(field, value, f"must be at most {maximum:g} seconds")
    if whole_ms and 0 < seconds < 0.001:
        raise InvalidArgument(field, value, "must be at least 0.001 seconds (1 ms)")
    return seconds


def to_ms(seconds: float) -> int:
    """Return whole milliseconds for Redis, never rounding a positive duration down to 0."""
    if seconds <= 0:
        return 0
    return max(1, round(seconds * 1000))


def check_choice(value: _T, field: str, choices: Collection[_T]) -> _T:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        listed = ", ".join(str(choice) for choice in choices)
        raise InvalidArgument(field, value, f"must be one of {listed}")
    return value


def check_token(value: object, field: str, hint: str) -> str:
    """Return ``value`` if it is a token the services hand out (32 lowercase hex digits);
    ``hint`` says where the caller finds the right one."""
    if not isinstance(value, str) or not _TOKEN_RE.fullmatch(value):
        raise InvalidArgument(field, value, hint)
    return value


def check_text(value: object, field: str, max_length: int, *, multiline: bool = True) -> str:
    """Return ``value`` in NFC form if it is acceptable free text, else raise.

    Refuse a non-string, blank text, more than ``max_length`` characters, and
    control characters (line breaks and tabs are allowed when ``multiline``).
    The error does not quote the text.
    """
    if not isinstance(value, str):
        raise InvalidArgumentType(
            field, value, f"must be a string, got {type(value).__name__}", show_value=False
        )
    if len(value) > max_length:
        raise InvalidArgument(
            field,
            value,
            f"{len(value)} characters; shorten it to at most {max_length}",
            show_value=False,
        )
    text = unicodedata.normalize("NFC", value)
    if not text.strip():
        raise InvalidArgument(field, value, "must not be empty", show_value=False)
    allowed = _TEXT_CONTROLS_ALLOWED if multiline else frozenset()
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cs") and char not in allowed:
            raise InvalidArgument(
                field,
                value,
                f"control character U+{ord(char):04X} is not allowed",
                show_value=False,
            )
    return text


def check_key_part(value: object, field: str = "name") -> str:
    """Return ``value`` in NFC form if it may be used inside a key, else raise.

    ``field`` names the value in the error ("user", "guild", "chat", ...). Refuse a
    non-string, an empty or over-long value (REDISPARTS["MAX_KEY_PART_LENGTH"]),
    key-syntax or glob characters (``: { } * ? [ ] \\``), control characters, and
    whitespace other than an inner space.
    """
    found = _valid_key_parts.get(value) if type(value) is str else None
    if found is not None:
        return found
    if not isinstance(value, str):
        raise InvalidArgumentType(field, value, f"must be a string, got {type(value).__name__}")
    valid = _checked_key_part(value, field)
    if type(value) is str:
        _valid_key_parts.remember(value, valid)
    return valid


# Key parts found valid lately, and their NFC form: services check the same few user,
# item and chat names on every call, and a lookup here costs a fraction of the checks.
# The length limit is a setting.
_valid_key_parts: SettingsCache[str, str] = SettingsCache()


def _checked_key_part(value: str, field: str) -> str:
    limit = app_settings.MAX_KEY_PART_LENGTH
    if len(value) > limit:
        raise InvalidArgument(field, value, f"longer than {limit} characters; shorten it")
    if (
        value.isascii()
        and value.isprintable()  # no control character
        and value == value.strip(" ")
        and value
        and FORBIDDEN_KEY_CHARACTERS.isdisjoint(value)
    ):
        return value  # the common case, without the per-character Unicode checks below
    text = unicodedata.normalize("NFC", value)
    if not text:
        raise InvalidArgument(field, value, "must not be empty")
    if text != text.strip(" "):
        raise InvalidArgument(field, value, "must not start or end with a space")
    for char in text:
        if char in FORBIDDEN_KEY_CHARACTERS:
            raise InvalidArgument(field, value, f"the character {char!r} is not allowed")
        category = unicodedata.category(char)
        if category in FORBIDDEN_KEY_CATEGORIES or (char.isspace() and char != " "):
            name = unicodedata.name(char, f"U+{ord(char):04X}")
            raise InvalidArgument(field, value, f"control or whitespace character {name}")
    return text
