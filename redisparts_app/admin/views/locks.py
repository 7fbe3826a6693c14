"""Held locks and semaphores in use, a page of their registry at a time."""

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import reverse

from ...exceptions import RedisPartsError, shorten
from ...services import listings, locks, semaphores
from .paging import LOCKS_PER_PAGE, SEMAPHORES_PER_PAGE, cursor_page

__all__ = ["held_locks", "release_lock", "release_permit", "semaphores_in_use"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin


def held_locks(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    held, pager = cursor_page(request, listings.lock_page, LOCKS_PER_PAGE)
    return model_admin.render(
        request, "locks.html", {"title": "Held locks", "locks": held, **pager}, live=True
    )


def semaphores_in_use(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    names, pager = cursor_page(request, listings.semaphore_page, SEMAPHORES_PER_PAGE)
    rows = [{"name": name, "holders": semaphores.holders(name)} for name in names]
    return model_admin.render(
        request,
        "semaphores.html",
        {"title": "Semaphores", "semaphores": rows, **pager},
        live=True,
    )


def release_lock(model_admin: "RedisPartsAdmin", request: HttpRequest, name: str) -> HttpResponse:
    """Release a held lock for its stuck or dead holder (POST, with the owner token seen)."""
    return _force_release(
        model_admin,
        request,
        lambda owner: locks.force_release(name, owner),
        field="owner",
        done=f"Lock {name} released; one waiter was woken.",
        stale=f"lock {name} is no longer held by {{}}.",
        back="admin:redisparts_locks",
    )


def release_permit(model_admin: "RedisPartsAdmin", request: HttpRequest, name: str) -> HttpResponse:
    """Take a semaphore permit back from a stuck or dead holder (POST, with its holder id)."""
    return _force_release(
        model_admin,
        request,
        lambda holder: semaphores.force_release(name, holder),
        field="holder",
        done=f"Permit released on {name}; one waiter was woken.",
        stale=f"permit {{}} on {name} was no longer live.",
        back="admin:redisparts_semaphores",
    )


def _force_release(
    model_admin: "RedisPartsAdmin",
    request: HttpRequest,
    release: Callable[[str], bool],
    *,
    field: str,
    done: str,
    stale: str,
    back: str,
) -> HttpResponse:
    """Release for the holder named by POST ``field``; report ``done`` or ``stale`` (with
    the holder shortened: a token as typed is never echoed in full) and go ``back``."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    model_admin.require_change(request)
    holder = request.POST.get(field, "")
    try:
        released = release(holder)
    except (RedisPartsError, ValueError) as exc:
        messages.error(request, f"Nothing done: {exc}")
    else:
        if released:
            messages.success(request, done)
        else:
            messages.error(request, "Nothing done: " + stale.format(shorten(holder, 40)))
    return HttpResponseRedirect(reverse(back))
