"""Frozen dataclass instances built on hot paths.

Import: ``from redisparts_app.frozen import filled``.
"""

from typing import Any, TypeVar

__all__ = ["filled"]

_T = TypeVar("_T")
_new_object = object.__new__


def filled(cls: type[_T], fields: dict[str, Any]) -> _T:
    """An instance of the frozen dataclass ``cls`` holding ``fields``: every field, nothing else.

    The generated ``__init__`` sets each field through ``object.__setattr__``, slower than
    filling the instance dict at once, which results built on every call (a purchase's, a
    fetch's messages) do. Nothing is checked: the caller gives the fields.
    """
    instance = _new_object(cls)
    instance.__dict__.update(fields)
    return instance
