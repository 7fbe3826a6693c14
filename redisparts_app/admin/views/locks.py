"""Held locks and semaphores in use, a SCAN page at a time."""

from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse

from ...services import listings, semaphores
from .paging import LOCKS_PER_PAGE, SEMAPHORES_PER_PAGE, cursor_page

__all__ = ["held_locks", "semaphores_in_use"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin


def held_locks(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    held, pager = cursor_page(request, listings.lock_page, LOCKS_PER_PAGE)
    return model_admin.render(
        request, "locks.html", {"title": "Held locks", "locks": held, **pager}
    )


def semaphores_in_use(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    names, pager = cursor_page(request, listings.semaphore_page, SEMAPHORES_PER_PAGE)
    rows = [{"name": name, "holders": semaphores.holders(name)} for name in names]
    return model_admin.render(
        request, "semaphores.html", {"title": "Semaphores", "semaphores": rows, **pager}
    )
