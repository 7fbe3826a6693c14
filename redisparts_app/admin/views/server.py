"""Persistence and replication status of the server."""

from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse

from ...services.persistence import server_status

__all__ = ["persistence"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin


def persistence(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    status = server_status()
    replicas = status.pop("replicas", None)
    return model_admin.render(
        request,
        "persistence.html",
        {
            "title": "Persistence and replication",
            "status": sorted(status.items()),
            "replicas": replicas,
        },
    )
