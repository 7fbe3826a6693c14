"""Task queues: lengths and a peek per queue, the task lists, one task, retry, cancel and
delete."""

import json
import time
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from django.contrib import messages
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.urls import reverse

from ...exceptions import RedisPartsError, TaskNotFound
from ...services import figures
from ...services.tasks import Cancel, TaskInfo, TaskQueue, queue_groups
from .paging import TASKS_PER_PAGE, offset_page

__all__ = [
    "BULK_LIMIT",
    "TASK_LISTS",
    "bulk",
    "cancel",
    "delete",
    "peek",
    "queues",
    "retry",
    "task",
    "task_list",
    "task_queue",
]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin

# kind -> (label, TaskQueue method listing it, help text)
TASK_LISTS = {
    "inflight": ("In flight", "inflight", "Tasks being run, earliest lease deadline first."),
    "failed": ("Failed", "failed", "Tasks that raised on their last retry, oldest first."),
    "quarantine": (
        "Quarantined",
        "quarantined",
        "Tasks whose worker died on every delivery, oldest first.",
    ),
    "delayed": ("Delayed", "delayed", "Delayed tasks and retries, soonest due first."),
}
# Lists whose tasks can be chosen for a bulk action, and the actions each allows.
BULK_ACTIONS = {
    "failed": ("retry", "delete"),
    "quarantine": ("retry", "delete"),
    "delayed": ("cancel", "delete"),
    "ready": ("cancel", "delete"),
    "inflight": ("cancel",),
}
# What a cancel did, as the admin says it.
CANCELLED_SAYS = {
    Cancel.CANCELLED: "cancelled: it will not run",
    Cancel.ABORTING: "is running: asked to stop (ended after the grace period)",
    Cancel.FINISHED: "had already ended: nothing done",
    Cancel.UNKNOWN: "is not known (or ended keeping no result): nothing done",
}
BULK_LIMIT = TASKS_PER_PAGE  # a bulk action acts on at most one page of tasks


def task_queue(group: str | None) -> TaskQueue:
    """The queue group named in the URL or the query; a bad name is a 404."""
    try:
        return TaskQueue(group or None)
    except (RedisPartsError, ValueError, TypeError) as exc:
        raise Http404(str(exc)) from exc


def queues(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    groups = figures.queue_figures()
    context = {"title": "Task queues", "groups": groups, "workers": _workers(groups)}
    return model_admin.render(request, "queues.html", context, live=True)


def _workers(groups: list[figures.GroupFigures]) -> list[dict[str, object]]:
    """The workers whose heartbeat each group holds, with the seconds since their last beat.

    A worker that died stays listed, its beat growing old, until the reaper forgets it.
    """
    rows: list[dict[str, object]] = []
    if not groups:
        return rows
    seconds, micros = TaskQueue(groups[0].group).client.time()
    now = seconds + micros / 1e6  # the server's clock, which the beats use: read once
    for group in groups:
        queue = TaskQueue(group.group)
        for worker, beat in sorted(queue.workers().items()):
            rows.append({"group": group.group, "worker": worker, "age": max(0.0, now - beat)})
    return rows


def peek(
    model_admin: "RedisPartsAdmin", request: HttpRequest, group: str, queue: str
) -> HttpResponse:
    tasks = task_queue(group)
    try:
        total = tasks.length(queue)
    except (RedisPartsError, ValueError) as exc:
        raise Http404(str(exc)) from exc
    pages = offset_page(request, total, TASKS_PER_PAGE)
    return model_admin.render(
        request,
        "peek.html",
        {
            "title": f"Queue {queue}",
            "group": tasks.group,
            "queue": queue,
            "tasks": tasks.peek(queue, pages["start"], TASKS_PER_PAGE),
            "bulk_actions": BULK_ACTIONS["ready"],
            "pages": pages,
            "now": time.time(),
        },
        live=True,
    )


def task_list(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    kind = request.GET.get("kind", "failed")
    if kind not in TASK_LISTS:
        raise Http404(f"no task list {kind!r}")
    label, method, help_text = TASK_LISTS[kind]
    queue = task_queue(request.GET.get("group"))
    counts = queue.counts()
    pages = offset_page(request, counts[kind], TASKS_PER_PAGE)
    return model_admin.render(
        request,
        "tasks.html",
        {
            "title": f"{label} tasks",
            "kind": kind,
            "help_text": help_text,
            "kinds": [(key, value[0], counts[key]) for key, value in TASK_LISTS.items()],
            "group": queue.group,
            "groups": queue_groups(with_default=True),
            "tasks": getattr(queue, method)(pages["start"], TASKS_PER_PAGE),
            "bulk_actions": BULK_ACTIONS.get(kind, ()),
            "pages": pages,
            "now": time.time(),
        },
        live=True,
    )


def task(
    model_admin: "RedisPartsAdmin", request: HttpRequest, group: str, task_id: str
) -> HttpResponse:
    """A task while it is queued or held, and its result (with the progress a running task
    reports, hence live) while the result's TTL lasts."""
    queue = task_queue(group)
    try:
        outcome = queue.result(task_id).info()
    except (RedisPartsError, ValueError) as exc:
        raise Http404(str(exc)) from exc
    found = _find(queue, task_id)
    if found is None and outcome.state == "PENDING":
        raise Http404(f"no task {task_id!r} and no result of it")
    arguments = {"args": found.args, "kwargs": found.kwargs} if found else None
    return model_admin.render(
        request,
        "task.html",
        {
            "title": f"Task {found.name if found else outcome.name or task_id}",
            "group": queue.group,
            "task_id": task_id,
            "task": found,
            "result": outcome,
            "return_value": json.dumps(outcome.return_value, indent=2, ensure_ascii=False),
            "arguments": json.dumps(arguments, indent=2, ensure_ascii=False) if found else "",
        },
        live=not outcome.finished,
    )


def retry(
    model_admin: "RedisPartsAdmin", request: HttpRequest, group: str, task_id: str
) -> HttpResponse:
    return _task_action(model_admin, request, group, task_id, "retry")


def delete(
    model_admin: "RedisPartsAdmin", request: HttpRequest, group: str, task_id: str
) -> HttpResponse:
    return _task_action(model_admin, request, group, task_id, "delete")


def cancel(
    model_admin: "RedisPartsAdmin", request: HttpRequest, group: str, task_id: str
) -> HttpResponse:
    return _task_action(model_admin, request, group, task_id, "cancel")


def bulk(model_admin: "RedisPartsAdmin", request: HttpRequest, group: str) -> HttpResponse:
    """Retry, cancel or delete the chosen tasks: a page listing them asks first, then each
    is done.

    A task that finished, moved or vanished meanwhile is counted, not an error.
    """
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    model_admin.require_change(request)
    queue = task_queue(group)
    back = _back(request, queue)
    action = request.POST.get("action", "")
    ids = list(dict.fromkeys(request.POST.getlist("ids")))  # once each, in the order given
    if action not in ("retry", "cancel", "delete"):
        messages.error(request, "Nothing done: choose retry, cancel or delete.")
        return HttpResponseRedirect(back)
    if not ids:
        messages.error(request, "Nothing done: no task was selected.")
        return HttpResponseRedirect(back)
    if len(ids) > BULK_LIMIT:
        messages.error(request, f"Nothing done: at most {BULK_LIMIT} tasks at a time.")
        return HttpResponseRedirect(back)
    if request.POST.get("confirmed") != "yes":
        return model_admin.render(
            request,
            "task_bulk.html",
            {
                "title": f"{action.capitalize()} {len(ids)} task{'s' if len(ids) != 1 else ''}?",
                "action": action,
                "group": queue.group,
                "chosen": [(task_id, _find(queue, task_id)) for task_id in ids],
                "back": back,
            },
        )
    if action == "cancel":
        return _bulk_cancel(request, queue, ids, back)
    act = queue.requeue if action == "retry" else queue.delete
    done, missing, refused = 0, 0, []
    for task_id in ids:
        try:
            act(task_id)
            done += 1
        except TaskNotFound:
            missing += 1
        except (RedisPartsError, ValueError) as exc:
            refused.append(str(exc))
    verb = "back in their queue" if action == "retry" else "deleted"
    summary = f"{done} task{'s' if done != 1 else ''} {verb}"
    if missing:
        summary += f"; {missing} no longer there" + (" to retry" if action == "retry" else "")
    (messages.success if done else messages.error)(request, summary + ".")
    for reason in refused[:3]:
        messages.error(request, f"Refused: {reason}")
    return HttpResponseRedirect(back)


def _bulk_cancel(request: HttpRequest, queue: TaskQueue, ids: list[str], back: str) -> HttpResponse:
    said: dict[Cancel, int] = dict.fromkeys(Cancel, 0)
    refused = []
    for task_id in ids:
        try:
            said[queue.cancel(task_id)] += 1
        except (RedisPartsError, ValueError) as exc:
            refused.append(str(exc))
    cancelled, aborting = said[Cancel.CANCELLED], said[Cancel.ABORTING]
    summary = f"{cancelled} task{'s' if cancelled != 1 else ''} cancelled"
    if aborting:
        summary += f"; {aborting} running, asked to stop"
    gone = said[Cancel.FINISHED] + said[Cancel.UNKNOWN]
    if gone:
        summary += f"; {gone} already ended or no longer there"
    (messages.success if cancelled or aborting else messages.error)(request, summary + ".")
    for reason in refused[:3]:
        messages.error(request, f"Refused: {reason}")
    return HttpResponseRedirect(back)


def _find(queue: TaskQueue, task_id: str) -> TaskInfo | None:
    try:
        return queue.get(task_id)
    except (RedisPartsError, ValueError):
        return None


def _back(request: HttpRequest, queue: TaskQueue) -> str:
    """The admin page an action came from (never another site), else the queue's tasks."""
    back = request.POST.get("next", "")
    if back.startswith(reverse("admin:redisparts_app_redisparts_changelist")):
        return back
    return reverse("admin:redisparts_tasks") + "?" + urlencode({"group": queue.group})


def _task_action(
    model_admin: "RedisPartsAdmin", request: HttpRequest, group: str, task_id: str, action: str
) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    model_admin.require_change(request)
    queue = task_queue(group)
    back = _back(request, queue)
    try:
        if action == "retry":
            queue.requeue(task_id)
            messages.success(request, f"Task {task_id} is back in its queue.")
        elif action == "cancel":
            said = queue.cancel(task_id)
            acted = said in (Cancel.CANCELLED, Cancel.ABORTING)
            (messages.success if acted else messages.error)(
                request, f"Task {task_id} {CANCELLED_SAYS[said]}."
            )
        else:
            queue.delete(task_id)
            messages.success(request, f"Task {task_id} deleted.")
    except TaskNotFound as exc:
        messages.error(request, f"Nothing done: {exc}.")
    except (RedisPartsError, ValueError) as exc:
        messages.error(request, f"Nothing done: {exc}")
    return HttpResponseRedirect(back)
