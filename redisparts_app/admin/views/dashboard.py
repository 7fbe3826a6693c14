"""The dashboard: task counts per queue group and a line on each other component."""

from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse

from ...services import config, counters, locks, semaphores
from ...services.persistence import server_status
from ...services.tasks import TaskQueue, queue_groups

__all__ = ["dashboard"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin


def dashboard(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    groups = []
    for group in queue_groups(with_default=True):
        counts = TaskQueue(group).counts()
        groups.append({"name": group, "ready": sum(counts["queues"].values()), **counts})
    return model_admin.render(
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
