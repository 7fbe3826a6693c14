"""Periodic schedules: timing, paused, last and next five fire times, last run; pause,
resume, run now and edit the timing (POST)."""

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import reverse
from django.utils.module_loading import autodiscover_modules

from ...exceptions import RedisPartsError
from ...services.tasks import schedules

__all__ = ["schedule_action", "schedule_list"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin

ACTIONS = ("pause", "resume", "run", "set", "reset")


def schedule_list(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    autodiscover_modules("tasks")  # schedules are declared in the apps' tasks modules
    now = schedules.server_now()
    found = schedules.states()
    rows = [{"state": state, "next": state.next_slots(now)} for state in found]
    return model_admin.render(
        request, "schedules.html", {"title": "Periodic schedules", "rows": rows}, live=True
    )


def schedule_action(
    model_admin: "RedisPartsAdmin", request: HttpRequest, name: str
) -> HttpResponse:
    """Pause, resume, run now, set or reset the timing of one schedule (POST ``action``)."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    model_admin.require_change(request)
    autodiscover_modules("tasks")
    action = request.POST.get("action", "")
    try:
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action[:20]!r}")
        if action == "pause":
            schedules.pause(name)
            done = f"Paused {name}."
        elif action == "resume":
            schedules.resume(name)
            done = f"Resumed {name}: it fires from its next slot."
        elif action == "run":
            done = f"Enqueued a run of {name}: task {schedules.run_now(name)}."
        elif action == "reset":
            schedules.reset_timing(name)
            done = f"{name} fires as declared in code again."
        else:
            timing = _timing(request)
            done = f"{name} now fires {schedules.set_timing(name, **timing).describe()}."
    except (RedisPartsError, ValueError) as exc:
        messages.error(request, f"Nothing done: {exc}")
    else:
        messages.success(request, done)
    return HttpResponseRedirect(reverse("admin:redisparts_schedules"))


def _timing(request: HttpRequest) -> dict[str, Any]:
    """The timing of the edit form: a cron expression and zone, or an interval."""
    cron = request.POST.get("cron", "").strip()
    every = request.POST.get("every", "").strip()
    if cron and every:
        raise ValueError("give a cron expression or an interval, not both")
    if every:
        try:
            return {"every": float(every)}
        except ValueError:
            raise ValueError(
                f"the interval must be a number of seconds, got {every[:20]!r}"
            ) from None
    return {"cron": cron, "tz": request.POST.get("tz", "").strip() or "UTC"}
