from django.db import models


class FencedRecord(models.Model):
    """A resource that keeps the highest lock fencing token that wrote to it."""

    name = models.CharField(max_length=50, unique=True)
    value = models.IntegerField(default=0)
    fence = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return self.name


class FencedWrite(models.Model):
    """One accepted fenced write, inserted in the transaction of the write itself, so the
    ids give the order in which the writes committed (tests/postgres/test_fencing.py)."""

    fence = models.BigIntegerField()
    writer = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.writer}:{self.fence}"
