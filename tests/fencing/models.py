from django.db import models


class FencedRecord(models.Model):
    """A resource that keeps the highest lock fencing token that wrote to it."""

    name = models.CharField(max_length=50, unique=True)
    value = models.IntegerField(default=0)
    fence = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return self.name
