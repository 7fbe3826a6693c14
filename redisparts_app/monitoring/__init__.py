"""Operations endpoints (the ``monitoring`` extra): health checks, Prometheus metrics, access.

``include("redisparts_app.monitoring.urls")`` serves both to staff or a bearer token.
"""

__all__: list[str] = []  # a namespace: import the modules inside
