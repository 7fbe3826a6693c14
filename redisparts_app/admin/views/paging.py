"""Paging of the admin's long lists: the page sizes, and the two kinds of page.

Lists kept in order (task lists, the counters' index) are paged by offset; lists found by
SCAN are paged by cursor, the only thing a page carries to the next.
"""

from collections.abc import Callable
from typing import Any, TypeVar

from django.http import HttpRequest

from ...services.listings import Page

__all__ = [
    "CHATS_PER_PAGE",
    "CONFIGS_PER_PAGE",
    "COUNTERS_PER_PAGE",
    "GUILDS_PER_PAGE",
    "LISTINGS_PER_PAGE",
    "LOCKS_PER_PAGE",
    "LOG_NAMES_PER_PAGE",
    "MAIL_PER_PAGE",
    "ONLINE_PER_PAGE",
    "SEMAPHORES_PER_PAGE",
    "TASKS_PER_PAGE",
    "counted_page",
    "cursor_page",
    "int_param",
    "offset_page",
]

T = TypeVar("T")

TASKS_PER_PAGE = 50
LOCKS_PER_PAGE = 50
SEMAPHORES_PER_PAGE = 20  # each row reads the semaphore's holders
CHATS_PER_PAGE = 25  # each row reads every member's pending count
COUNTERS_PER_PAGE = 50
LOG_NAMES_PER_PAGE = 50
CONFIGS_PER_PAGE = 50
GUILDS_PER_PAGE = 50
LISTINGS_PER_PAGE = 50
MAIL_PER_PAGE = 20
ONLINE_PER_PAGE = 100


def int_param(request: HttpRequest, name: str, default: int = 0, least: int = 0) -> int:
    """Read a non-negative integer query parameter; a bad one counts as ``default``."""
    raw = request.GET.get(name, "")
    return (
        int(raw)
        if raw.isascii() and raw.isdigit() and len(raw) < 19 and int(raw) >= least
        else default
    )


def offset_page(request: HttpRequest, total: int, size: int) -> dict[str, Any]:
    """The numbered page ``?page=`` of a list of ``total`` entries, clamped to the list."""
    count = max(1, -(-total // size))
    page = min(max(1, int_param(request, "page", 1, 1)), count)
    return {
        "number": page,
        "count": count,
        "total": total,
        "start": (page - 1) * size,
        "previous": page - 1 if page > 1 else None,
        "next": page + 1 if page < count else None,
    }


def counted_page(
    request: HttpRequest, read: Callable[[int, int], tuple[T, int]], size: int
) -> tuple[T, dict[str, Any]]:
    """The page ``?page=`` of a list whose read also counts it: ``read(start, size)``
    gives (entries, total). One read, a second only when the page asked for is past the
    end (it shows the last page)."""
    start = (int_param(request, "page", 1, 1) - 1) * size
    entries, total = read(start, size)
    pages = offset_page(request, total, size)
    if pages["start"] != start:
        entries, _total = read(pages["start"], size)
    return entries, pages


def cursor_page(
    request: HttpRequest, listing: Callable[[int, int], Page[T]], size: int
) -> tuple[list[T], dict[str, Any]]:
    """The entries of the page ``?cursor=`` of a SCAN listing, and its navigation."""
    cursor = int_param(request, "cursor")
    page = listing(cursor, size)
    return page.items, {"next_cursor": page.cursor or None, "first_page": cursor == 0}
