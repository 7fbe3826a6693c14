"""Operations endpoints (the ``monitoring`` extra): ``include("redisparts_app.monitoring.urls")``.

Use: ``path("ops/", include("redisparts_app.monitoring.urls"))`` in a URLconf.

- ``metrics`` Prometheus metrics (``metrics.py``)
- ``health/`` django-health-check's page over the components' checks (``health.py``)

Both answer staff with the view_redisparts permission, or ``Authorization: Bearer
<REDISPARTS["METRICS_TOKEN"]>``; everyone else gets 403.
"""

from django.urls import path

from .health import HealthView
from .metrics import metrics_view

__all__ = [
    "urlpatterns",
]

urlpatterns = [
    path("metrics", metrics_view, name="redisparts_metrics"),
    path("health/", HealthView.as_view(), name="redisparts_health"),
]
