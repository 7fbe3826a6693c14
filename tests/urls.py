"""URLs of the app's tests: the admin and the monitoring endpoints, as a user's project has them."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # /metrics and /health/: staff or REDISPARTS["METRICS_TOKEN"] only.
    path("", include("redisparts_app.monitoring.urls")),
]
