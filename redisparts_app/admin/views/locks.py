"""Held locks and semaphores in use, a SCAN page at a time."""

from typing import TYPE_CHECKING

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import reverse

from ...exceptions import RedisPartsError, shorten
from ...services import listings, locks, semaphores
from .paging import LOCKS_PER_PAGE, SEMAPHORES_PER_PAGE, cursor_page

__all__ = ["held_locks", "release_lock", "semaphores_in_use"]

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


def release_lock(model_admin: "RedisPartsAdmin", request: HttpRequest, name: str) -> HttpResponse:
    """Release a held lock for its stuck or dead holder (POST, with the owner token seen)."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    model_admin.require_change(request)
    owner = request.POST.get("owner", "")
    try:
        released = locks.force_release(name, owner)
    except (RedisPartsError, ValueError) as exc:
        messages.error(request, f"Nothing done: {exc}")
    else:
        if released:
            messages.success(request, f"Lock {name} released; one waiter was woken.")
        else:
            holder = shorten(owner, 40)  # the token as typed, never echoed in full
            messages.error(request, f"Nothing done: lock {name} is no longer held by {holder}.")
    return HttpResponseRedirect(reverse("admin:redisparts_locks"))
