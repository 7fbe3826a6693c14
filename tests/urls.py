"""URLs of the app's tests: a project's own page, the admin and the monitoring endpoints,
wired as a user's project wires them."""

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def home(request: HttpRequest) -> HttpResponse:
    """A page of the project itself, which the maintenance page stands in for."""
    return HttpResponse("A page of the project.")


urlpatterns = [
    path("", home, name="home"),
    path("admin/", admin.site.urls),
    # /metrics and /health/: staff or REDISPARTS["METRICS_TOKEN"] only.
    path("", include("redisparts_app.monitoring.urls")),
]
