"""An unmanaged model that gives the Redis parts a place in the Django admin.

Import: ``from redisparts_app.models import RedisParts``.

No table holds Redis data: ``RedisParts`` only anchors the admin pages (see
admin.py) and the permissions staff need: ``view_redisparts`` to see them,
``change_redisparts`` to retry or delete tasks and change the flag and configurations.
"""

from django.db import models

__all__ = [
    "RedisParts",
]


class RedisParts(models.Model):
    class Meta:
        managed = False
        default_permissions = ("view", "change")
        verbose_name = verbose_name_plural = "Redis parts"

    def __str__(self) -> str:
        return "Redis parts"
