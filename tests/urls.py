"""URLs of the app's tests: a project's own page, the admin and the monitoring endpoints,
wired as a user's project wires them."""

import redis
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def home(request: HttpRequest) -> HttpResponse:
    """A page of the project itself, which the maintenance page stands in for."""
    return HttpResponse("A page of the project.")


async def async_page(request: HttpRequest) -> HttpResponse:
    """An async view: under ASGI the middleware chain before it stays async."""
    if request.GET.get("redis") == "down":
        raise redis.ConnectionError("Redis went away")
    return HttpResponse("An async page.")


urlpatterns = [
    path("", home, name="home"),
    path("async/", async_page, name="async_page"),
    path("admin/", admin.site.urls),
    # /metrics and /health/: staff or REDISPARTS["METRICS_TOKEN"] only.
    path("", include("redisparts_app.monitoring.urls")),
]
