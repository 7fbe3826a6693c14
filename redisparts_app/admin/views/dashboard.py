"""The dashboard: task counts per queue group and a line on each other component."""

from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse

from ...services.figures import overview

__all__ = ["dashboard"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin


def dashboard(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    context = {"title": "Redis parts", **overview()}
    return model_admin.render(request, "index.html", context, live=True)
