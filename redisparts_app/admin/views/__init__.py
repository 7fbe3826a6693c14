"""The pages of the Redis parts admin, one module per topic.

A view is a function ``view(model_admin, request, **url_kwargs)``; the ModelAdmin
(``redisparts_app.admin``) checks permissions, catches an unreachable Redis and renders.
``ROUTES`` lists every page as (route, view, URL name); ``NAVIGATION`` the pages linked
from every page.
"""

from collections.abc import Callable

from django.http import HttpResponse

from . import (
    autocomplete,
    chats,
    config,
    dashboard,
    locks,
    people,
    records,
    schedules,
    server,
    tasks,
)

__all__ = ["NAVIGATION", "ROUTES", "Route"]

Route = tuple[str, Callable[..., HttpResponse], str]

ROUTES: list[Route] = [
    ("", dashboard.dashboard, "changelist"),
    ("queues/", tasks.queues, "queues"),
    ("queues/<str:group>/<str:queue>/", tasks.peek, "peek"),
    ("tasks/", tasks.task_list, "tasks"),
    ("tasks/<str:group>/<str:task_id>/", tasks.task, "task"),
    ("tasks/<str:group>/<str:task_id>/retry/", tasks.retry, "task_retry"),
    ("tasks/<str:group>/<str:task_id>/delete/", tasks.delete, "task_delete"),
    ("tasks/<str:group>/<str:task_id>/cancel/", tasks.cancel, "task_cancel"),
    ("bulk-actions/<str:group>/", tasks.bulk, "task_bulk"),
    ("schedules/", schedules.schedule_list, "schedules"),
    ("schedules/<str:name>/", schedules.schedule_action, "schedule_action"),
    ("locks/", locks.held_locks, "locks"),
    ("locks/<str:name>/release/", locks.release_lock, "lock_release"),
    ("semaphores/", locks.semaphores_in_use, "semaphores"),
    ("semaphores/<str:name>/release/", locks.release_permit, "permit_release"),
    ("chats/", chats.chat_list, "chats"),
    ("files/", chats.file_channels, "files"),
    ("market/", people.market_overview, "market"),
    ("mail/", people.mailbox, "mail"),
    ("presence/", people.online, "presence"),
    ("geoip/", people.geoip_lookup, "geoip"),
    ("counters/", records.counter_charts, "counters"),
    ("stats/", records.hourly_stats, "stats"),
    ("logs/", records.log_entries, "logs"),
    ("config/", config.configuration, "config"),
    ("config/maintenance/", config.maintenance, "maintenance"),
    ("persistence/", server.persistence, "persistence"),
    ("autocomplete/", autocomplete.try_autocomplete, "autocomplete"),
]

NAVIGATION: list[tuple[str, str]] = [
    ("Dashboard", "changelist"),
    ("Queues", "queues"),
    ("Tasks", "tasks"),
    ("Schedules", "schedules"),
    ("Locks", "locks"),
    ("Semaphores", "semaphores"),
    ("Chats", "chats"),
    ("Files", "files"),
    ("Market", "market"),
    ("Mail", "mail"),
    ("Presence", "presence"),
    ("GeoIP", "geoip"),
    ("Counters", "counters"),
    ("Stats", "stats"),
    ("Logs", "logs"),
    ("Configuration", "config"),
    ("Persistence", "persistence"),
    ("Autocomplete", "autocomplete"),
]
