from django.db import models

from redisparts_app.services.locks import FencedQuerySet


class MarketSummary(models.Model):
    """The market's figures, copied from Redis into the database (marketplace.summary).

    ``fence`` is the lock fencing token of the copy that wrote the row: a copy made
    under an older token is refused.
    """

    name = models.CharField(max_length=50, unique=True)
    listings = models.PositiveIntegerField(default=0)
    pending_sales = models.PositiveIntegerField(default=0)
    taken_at = models.DateTimeField(null=True)
    fence = models.BigIntegerField(default=0)

    objects = FencedQuerySet.as_manager()

    def __str__(self) -> str:
        return self.name
