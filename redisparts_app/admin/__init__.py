"""The "Redis parts" admin: pages over the data the services keep in Redis.

The unmanaged ``RedisParts`` model (models.py) gives the app its entry in the admin index;
every page hangs off its ModelAdmin through ``get_urls()``, wrapped in
``admin_site.admin_view`` (active staff only; others go to the login page). Viewing needs
``view_redisparts``, actions ``change_redisparts`` (superusers have both).

Pages read through the services, a page at a time (ZRANGE/LRANGE offsets, SCAN cursors).
Actions that change Redis accept POST only (with CSRF), report through ``messages`` and
redirect. When Redis is unreachable a page answers 503 with a message inside the admin
layout instead of an error.
"""

import functools
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import redis
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import path, reverse

from ..conf import app_settings
from ..exceptions import InvalidConfig, RedisPartsError, TaskNotFound
from ..models import RedisParts
from ..services import (
    autocomplete,
    config,
    counters,
    figures,
    listings,
    locks,
    logs,
    semaphores,
    stats,
)
from ..services.persistence import server_status
from ..services.tasks import TaskQueue, queue_groups
from .charts import bar_chart
from .forms import AutocompleteForm, ConfigForm, MaintenanceForm

PAGE_SIZE = 50
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
PAGES = [
    ("Dashboard", "changelist"),
    ("Queues", "queues"),
    ("Tasks", "tasks"),
    ("Locks", "locks"),
    ("Semaphores", "semaphores"),
    ("Chats", "chats"),
    ("Counters", "counters"),
    ("Stats", "stats"),
    ("Logs", "logs"),
    ("Configuration", "config"),
    ("Persistence", "persistence"),
    ("Autocomplete", "autocomplete"),
]


def _int_param(request: HttpRequest, name: str, default: int = 0, least: int = 0) -> int:
    """Read a non-negative integer query parameter; a bad one counts as ``default``."""
    raw = request.GET.get(name, "")
    return int(raw) if raw.isdigit() and len(raw) < 19 and int(raw) >= least else default


def _pages(page: int, total: int, size: int = PAGE_SIZE) -> dict[str, Any]:
    count = max(1, -(-total // size))
    page = min(max(1, page), count)
    return {
        "number": page,
        "count": count,
        "total": total,
        "start": (page - 1) * size,
        "previous": page - 1 if page > 1 else None,
        "next": page + 1 if page < count else None,
    }


@admin.register(RedisParts)
class RedisPartsAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # -- plumbing -----------------------------------------------------------------------

    def get_urls(self) -> list:
        # Only our pages: the default change and delete views would query a table that
        # does not exist.
        routes: list[tuple[str, Callable[..., HttpResponse], str]] = [
            ("queues/", self.queues_view, "queues"),
            ("queues/<str:group>/<str:queue>/", self.peek_view, "peek"),
            ("tasks/", self.tasks_view, "tasks"),
            ("tasks/<str:group>/<str:task_id>/", self.task_view, "task"),
            ("tasks/<str:group>/<str:task_id>/retry/", self.retry_view, "task_retry"),
            ("tasks/<str:group>/<str:task_id>/delete/", self.delete_task_view, "task_delete"),
            ("locks/", self.locks_view, "locks"),
            ("semaphores/", self.semaphores_view, "semaphores"),
            ("chats/", self.chats_view, "chats"),
            ("counters/", self.counters_view, "counters"),
            ("stats/", self.stats_view, "stats"),
            ("logs/", self.logs_view, "logs"),
            ("config/", self.config_view, "config"),
            ("config/maintenance/", self.maintenance_view, "maintenance"),
            ("persistence/", self.persistence_view, "persistence"),
            ("autocomplete/", self.autocomplete_view, "autocomplete"),
        ]
        wrap = self.admin_site.admin_view
        changelist = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        return [
            path("", wrap(self._guarded(self.changelist_view)), name=changelist),
            *(
                path(route, wrap(self._guarded(view)), name=f"redisparts_{name}")
                for route, view, name in routes
            ),
        ]

    def _guarded(self, func: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        """Check the view permission, and answer 503 in the admin layout when Redis is away."""

        @functools.wraps(func)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not self.has_view_permission(request):
                raise PermissionDenied
            try:
                response = func(request, *args, **kwargs)
                if isinstance(response, TemplateResponse):
                    response.render()  # so lazy reads fail here, not in the middleware
                return response
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                response = self._render(
                    request,
                    "unavailable.html",
                    {"title": "Redis is unreachable", "error": str(exc)},
                    status=503,
                )
                response["Retry-After"] = "5"
                return response.render()

        return wrapper

    def _render(
        self, request: HttpRequest, template: str, context: dict[str, Any], status: int = 200
    ) -> TemplateResponse:
        base = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "rp_pages": [
                (label, reverse(self._url_name(name)))
                for label, name in PAGES  # the navigation of every page
            ],
            "can_change": self.has_change_permission(request),
        }
        return TemplateResponse(
            request, f"redisparts_app/admin/{template}", {**base, **context}, status=status
        )

    def _url_name(self, name: str) -> str:
        if name == "changelist":
            return f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist"
        return f"admin:redisparts_{name}"

    def _check_change(self, request: HttpRequest) -> None:
        if not self.has_change_permission(request):
            raise PermissionDenied

    def _group(self, request: HttpRequest, group: str | None = None) -> TaskQueue:
        raw = group if group is not None else request.GET.get("group") or None
        try:
            return TaskQueue(raw)
        except (RedisPartsError, ValueError, TypeError) as exc:
            raise Http404(str(exc)) from exc

    # -- dashboard ----------------------------------------------------------------------

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        groups = []
        for group in queue_groups(with_default=True):
            counts = TaskQueue(group).counts()
            groups.append({"name": group, "ready": sum(counts["queues"].values()), **counts})
        return self._render(
            request,
            "index.html",
            {
                "title": "Redis parts",
                "groups": groups,
                "locks": len(locks.held_locks()),
                "semaphores": len(semaphores.semaphore_names()),
                "maintenance": config.maintenance_status(),
                "server": server_status(),
                "counters": counters.index_size(),
            },
        )

    # -- task queues --------------------------------------------------------------------

    def queues_view(self, request: HttpRequest) -> HttpResponse:
        groups = figures.queue_figures()
        return self._render(request, "queues.html", {"title": "Task queues", "groups": groups})

    def peek_view(self, request: HttpRequest, group: str, queue: str) -> HttpResponse:
        task_queue = self._group(request, group)
        try:
            total = task_queue.length(queue)
        except (RedisPartsError, ValueError) as exc:
            raise Http404(str(exc)) from exc
        pages = _pages(_int_param(request, "page", 1, 1), total)
        tasks = task_queue.peek(queue, pages["start"], PAGE_SIZE)
        return self._render(
            request,
            "peek.html",
            {
                "title": f"Queue {queue}",
                "group": task_queue.group,
                "queue": queue,
                "tasks": tasks,
                "pages": pages,
                "now": time.time(),
            },
        )

    def tasks_view(self, request: HttpRequest) -> HttpResponse:
        kind = request.GET.get("kind", "failed")
        if kind not in TASK_LISTS:
            raise Http404(f"no task list {kind!r}")
        label, method, help_text = TASK_LISTS[kind]
        queue = self._group(request)
        counts = queue.counts()
        pages = _pages(_int_param(request, "page", 1, 1), counts[kind])
        tasks = getattr(queue, method)(pages["start"], PAGE_SIZE)
        return self._render(
            request,
            "tasks.html",
            {
                "title": f"{label} tasks",
                "kind": kind,
                "help_text": help_text,
                "kinds": [(key, value[0], counts[key]) for key, value in TASK_LISTS.items()],
                "group": queue.group,
                "groups": queue_groups(with_default=True),
                "tasks": tasks,
                "pages": pages,
                "now": time.time(),
            },
        )

    def task_view(self, request: HttpRequest, group: str, task_id: str) -> HttpResponse:
        queue = self._group(request, group)
        try:
            task = queue.get(task_id)
        except (RedisPartsError, ValueError) as exc:
            raise Http404(str(exc)) from exc
        return self._render(
            request,
            "task.html",
            {
                "title": f"Task {task.name}",
                "group": queue.group,
                "task": task,
                "arguments": json.dumps(
                    {"args": task.args, "kwargs": task.kwargs}, indent=2, ensure_ascii=False
                ),
            },
        )

    def retry_view(self, request: HttpRequest, group: str, task_id: str) -> HttpResponse:
        return self._task_action(request, group, task_id, "retry")

    def delete_task_view(self, request: HttpRequest, group: str, task_id: str) -> HttpResponse:
        return self._task_action(request, group, task_id, "delete")

    def _task_action(
        self, request: HttpRequest, group: str, task_id: str, action: str
    ) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        self._check_change(request)
        queue = self._group(request, group)
        back = request.POST.get("next", "")
        if not back.startswith(reverse("admin:redisparts_tasks")):
            back = reverse("admin:redisparts_tasks") + "?" + urlencode({"group": queue.group})
        try:
            if action == "retry":
                queue.requeue(task_id)
                messages.success(request, f"Task {task_id} is back in its queue.")
            else:
                queue.delete(task_id)
                messages.success(request, f"Task {task_id} deleted.")
        except TaskNotFound as exc:
            messages.error(request, f"Nothing done: {exc}.")
        except (RedisPartsError, ValueError) as exc:
            messages.error(request, f"Nothing done: {exc}")
        return HttpResponseRedirect(back)

    # -- locks and semaphores -----------------------------------------------------------

    def locks_view(self, request: HttpRequest) -> HttpResponse:
        cursor = _int_param(request, "cursor")
        held, next_cursor = listings.lock_page(cursor, PAGE_SIZE)
        return self._render(
            request,
            "locks.html",
            {
                "title": "Held locks",
                "locks": held,
                "next_cursor": next_cursor or None,
                "first_page": cursor == 0,
            },
        )

    def semaphores_view(self, request: HttpRequest) -> HttpResponse:
        cursor = _int_param(request, "cursor")
        page = listings.semaphore_page(cursor, 20)
        rows = [{"name": name, "holders": semaphores.holders(name)} for name in page.names]
        return self._render(
            request,
            "semaphores.html",
            {
                "title": "Semaphores",
                "semaphores": rows,
                "next_cursor": page.cursor or None,
                "first_page": cursor == 0,
            },
        )

    # -- chats ----------------------------------------------------------------------------

    def chats_view(self, request: HttpRequest) -> HttpResponse:
        cursor = _int_param(request, "cursor")
        page = listings.chat_page(cursor, 25)
        chats = [chat for chat in map(listings.chat_overview, page.names) if chat is not None]
        return self._render(
            request,
            "chats.html",
            {
                "title": "Chats",
                "chats": chats,
                "next_cursor": page.cursor or None,
                "first_page": cursor == 0,
            },
        )

    # -- counters, stats and logs -------------------------------------------------------

    def counters_view(self, request: HttpRequest) -> HttpResponse:
        start = _int_param(request, "start")
        known, total = listings.counter_page(start, PAGE_SIZE)
        chosen = request.GET.get("name") or (next(iter(known), None))
        precisions = counters.precisions()
        precision = _int_param(request, "precision", precisions[0])
        if precision not in precisions:
            precision = precisions[0]
        chart = None
        if chosen:
            try:
                samples = counters.get_counter(chosen, precision)
            except (RedisPartsError, ValueError) as exc:
                messages.error(request, str(exc))
                samples, chosen = [], None
            points = [(time.strftime("%H:%M:%S", time.gmtime(s)), v) for s, v in samples]
            chart = bar_chart(points, title=f"{chosen} per {precision} s")
        return self._render(
            request,
            "counters.html",
            {
                "title": "Counters",
                "known": known,
                "chosen": chosen,
                "precision": precision,
                "precisions": precisions,
                "chart": chart,
                "start": start,
                "next_start": start + PAGE_SIZE if start + PAGE_SIZE < total else None,
                "previous_start": max(0, start - PAGE_SIZE) if start else None,
                "total": total,
            },
        )

    def stats_view(self, request: HttpRequest) -> HttpResponse:
        rows = []
        for context, kind in listings.stats_entries():
            current = stats.get_stats(context, kind)
            previous = stats.get_stats(context, kind, previous=True)
            rows.append({"context": context, "kind": kind, "now": current, "last": previous})
        slowest = stats.slowest_views(20)
        chart = bar_chart(
            [(view, seconds * 1000) for view, seconds in slowest],
            title="Average response time this hour, slowest views",
            unit=" ms",
        )
        return self._render(
            request,
            "stats.html",
            {"title": "Statistics", "rows": rows, "slowest": slowest, "chart": chart},
        )

    def logs_view(self, request: HttpRequest) -> HttpResponse:
        cursor = _int_param(request, "cursor")
        page = listings.log_page(cursor, PAGE_SIZE)
        name = request.GET.get("name") or (page.names[0] if page.names else None)
        severity = request.GET.get("severity", "info")
        if severity not in logs.SEVERITIES:
            severity = "info"
        recent, common, error = [], [], None
        if name:
            try:
                limit = min(PAGE_SIZE, int(app_settings.LOG_RECENT_LIMIT))
                recent = logs.recent(name, severity, limit)
                common = logs.common(name, severity, 20)
            except (RedisPartsError, ValueError) as exc:
                error = str(exc)
        return self._render(
            request,
            "logs.html",
            {
                "title": "Logs",
                "names": page.names,
                "next_cursor": page.cursor or None,
                "name": name,
                "severity": severity,
                "severities": logs.SEVERITIES,
                "recent": recent,
                "common": common,
                "error": error,
            },
        )

    # -- configuration --------------------------------------------------------------------

    def config_view(self, request: HttpRequest) -> HttpResponse:
        status = 200
        if request.method == "POST":
            self._check_change(request)
            form = ConfigForm(request.POST)
            if form.is_valid():
                kind, name = form.cleaned_data["kind"], form.cleaned_data["name"]
                if form.cleaned_data["delete"]:
                    gone = config.delete_config(kind, name)
                    messages.success(
                        request,
                        f"Configuration {kind}/{name} deleted."
                        if gone
                        else f"There was no configuration {kind}/{name}.",
                    )
                else:
                    try:
                        config.set_config(kind, name, form.cleaned_data["value"])
                    except InvalidConfig as exc:
                        form.add_error("value", str(exc))
                    else:
                        messages.success(request, f"Configuration {kind}/{name} saved.")
                if form.is_valid():
                    query = urlencode({"kind": kind, "name": name})
                    return HttpResponseRedirect(f"{reverse('admin:redisparts_config')}?{query}")
            status = 400
        else:
            kind, name = request.GET.get("kind", ""), request.GET.get("name", "")
            initial = {"kind": kind, "name": name, "value": "{}"}
            if kind and name:
                try:
                    current = config.get_config(kind, name, wait=0)
                    initial["value"] = json.dumps(current, indent=2, ensure_ascii=False)
                except (RedisPartsError, ValueError) as exc:
                    messages.error(request, str(exc))
            form = ConfigForm(initial=initial)
        stored, cursor = listings.config_page(_int_param(request, "cursor"), PAGE_SIZE)
        maintenance = config.maintenance_status()
        return self._render(
            request,
            "config.html",
            {
                "title": "Configuration",
                "form": form,
                "stored": stored,
                "next_cursor": cursor or None,
                "maintenance": maintenance,
                "maintenance_form": MaintenanceForm(
                    initial={"retry_after": app_settings.MAINTENANCE_RETRY_AFTER}
                ),
            },
            status=status,
        )

    def maintenance_view(self, request: HttpRequest) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        self._check_change(request)
        back = reverse("admin:redisparts_config")
        if request.POST.get("action") == "clear":
            was_set = config.clear_maintenance()
            messages.success(
                request,
                "Maintenance mode is off." if was_set else "Maintenance mode was already off.",
            )
            return HttpResponseRedirect(back)
        form = MaintenanceForm(request.POST)
        if not form.is_valid():
            problems = "; ".join(
                f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items()
            )
            messages.error(request, f"Maintenance mode not changed: {problems}")
            return HttpResponseRedirect(back)
        config.set_maintenance(
            retry_after=form.cleaned_data["retry_after"], message=form.cleaned_data["message"]
        )
        messages.success(request, "Maintenance mode is on: visitors see the maintenance page.")
        return HttpResponseRedirect(back)

    # -- persistence and autocomplete -----------------------------------------------------

    def persistence_view(self, request: HttpRequest) -> HttpResponse:
        status = server_status()
        replicas = status.pop("replicas", None)
        return self._render(
            request,
            "persistence.html",
            {
                "title": "Persistence and replication",
                "status": sorted(status.items()),
                "replicas": replicas,
            },
        )

    def autocomplete_view(self, request: HttpRequest) -> HttpResponse:
        cursor = _int_param(request, "cursor")
        page = listings.guild_page(cursor, PAGE_SIZE)
        form = AutocompleteForm(request.GET or None)
        results, guild = None, None
        if form.is_bound and form.is_valid():
            guild = form.cleaned_data["guild"]
            try:
                book = autocomplete.AddressBook(guild)
                results = book.complete(form.cleaned_data["prefix"], limit=10)
            except (RedisPartsError, ValueError) as exc:
                form.add_error("prefix", str(exc))
        context = {
            "title": "Autocomplete",
            "guilds": page.names,
            "next_cursor": page.cursor or None,
            "form": form,
            "guild": guild,
            "results": results,
        }
        template = "autocomplete_results.html" if request.GET.get("fragment") else None
        return self._render(request, template or "autocomplete.html", context)
