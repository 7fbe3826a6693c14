"""Tasks of the demo site, run by ``manage.py rp_worker email`` (rp_worker imports this module),
and its periodic schedules, fired by ``manage.py rp_scheduler``.

``send_sold_email`` tells a seller their item sold, through Django's e-mail API (in the demo
the file backend writes it to var/outbox/, which the Outbox page lists).

A sale and its e-mail are one step: the purchase writes the sale record into the market's
outbox atomically (``services.market``). ``enqueue_sold_email`` is the relay's ``deliver``:
it enqueues the e-mail task with the stable id ``sale-<sale id>`` and a de-duplication key of
the sale id kept ``RELAY_DEDUP_TTL`` seconds, so a sale relayed twice (a relay killed between
the enqueue and the outbox trim, or the web fast path racing ``market_relay``) queues one task.
``relay_sold_emails`` is the relay step the ``market_relay`` command runs in a loop and
``manage.py demo`` runs every second in its own (runner) process.

Bound of the relay: a sale relayed again within RELAY_DEDUP_TTL (one day) queues nothing;
relayed again later (a record left in the outbox by a relay that died after its enqueue and
no relay running for a day) it queues a second task, which finds the e-mail sent and sends
nothing (within NOTICE_KEEP).

Sending is idempotent per sale: the task claims a send marker (``market.begin_notice``)
before sending and marks it sent after, for ``NOTICE_KEEP`` seconds; a redelivered task
(a worker killed after the task ran, a duplicate relay beyond the de-duplication TTL)
finds it sent and sends nothing. The e-mail's Message-ID is ``<sale id@marketplace>``.
Bound: a worker killed after the mail left and before the marker was set sends it once
more after NOTICE_CLAIM_TTL seconds, with the same Message-ID.
"""

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage

from redisparts_app import tasks as maintenance
from redisparts_app.services import market
from redisparts_app.services.tasks import periodic, task

from .demo_data import EMAIL_DOMAIN
from .forms import format_cents

logger = logging.getLogger("marketplace")

# The app's upkeep, fired by the demo's rp_scheduler (see the Schedules admin page): the
# counter cleaner every minute, the registry prune every five, a backup every night.
periodic(every=60, pass_slot=True, name="clean-counters")(maintenance.clean_counters)
periodic(every=300, name="prune-registries")(maintenance.prune_registries)
periodic(
    cron="30 2 * * *",
    tz=settings.TIME_ZONE,
    name="nightly-backup",
    args=[str(settings.VAR_DIR / "backups")],
)(maintenance.backup)

# Seconds a run's claim on a sale's e-mail holds off other runs (a run killed while sending
# blocks retries this long); the task's retries (2 s doubling, 5 of them) outlast it.
NOTICE_CLAIM_TTL = 30.0
# Seconds a sale's "sent" marker is kept: redeliveries within it send nothing.
NOTICE_KEEP = 7 * 86400.0
# Seconds the relay's de-duplication key per sale is kept.
RELAY_DEDUP_TTL = 86400.0
MESSAGE_ID_DOMAIN = "marketplace"


class SendInProgress(Exception):
    """Another run holds the claim on this sale's e-mail; the queue retries later."""


def email_address(username: str) -> str:
    """The user's e-mail address, or a demo address made from the name."""
    user = get_user_model().objects.filter(username=username).first()
    return (user.email if user is not None and user.email else "") or f"{username}@{EMAIL_DOMAIN}"


def message_id(sale_id: str) -> str:
    """The stable Message-ID of a sale's e-mail, so a receiving system can drop a repeat."""
    return f"<{sale_id}@{MESSAGE_ID_DOMAIN}>"


@task(name="marketplace.send_sold_email", queue="email", max_retries=5)
def send_sold_email(
    seller: str, item: str, price: int, buyer: str, sale_id: str | None = None
) -> None:
    """E-mail ``seller`` that ``buyer`` bought ``item`` for ``price`` cents, once per sale.

    Without ``sale_id`` (a task queued before the outbox existed) it sends unconditionally.
    """
    message = EmailMessage(
        subject=f"Your {item} sold for {format_cents(price)}",
        body=(
            f"Hello {seller},\n\n{buyer} bought your {item} on the market for "
            f"{format_cents(price)}. The money is in your account.\n\n"
            "The redisparts market"
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[email_address(seller)],
        headers={"Message-ID": message_id(sale_id)} if sale_id is not None else None,
    )
    if sale_id is None:
        message.send()
        return
    claim = market.begin_notice(sale_id, NOTICE_CLAIM_TTL)
    if claim == "sent":
        logger.info("sold e-mail of sale %s already sent; not sending again", sale_id)
        return
    if claim == "busy":
        raise SendInProgress(f"another run is sending the e-mail of sale {sale_id}")
    try:
        message.send()
    except BaseException:
        # Not sent: let a retry claim it at once instead of after the claim's TTL.
        market.abandon_notice(sale_id, claim)
        raise
    market.finish_notice(sale_id, NOTICE_KEEP)


def enqueue_sold_email(sale: market.Sale, *, client: Any = None) -> str:
    """Queue the e-mail of ``sale`` once (the relay's deliver); return the task id.

    ``client``: the queue's Redis client (default: the task group's connection).
    """
    return send_sold_email.enqueue_with(
        client=client,
        kwargs={
            "seller": sale.seller,
            "item": sale.item,
            "price": sale.price,
            "buyer": sale.buyer,
            "sale_id": sale.sale_id,
        },
        task_id=f"sale-{sale.sale_id}",
        dedup_key=f"sold-email-{sale.sale_id}",
        dedup_ttl=RELAY_DEDUP_TTL,
        # Pushed now, never deferred to a database commit: the outbox record is dropped
        # right after this returns.
        on_commit=False,
    )


def relay_sold_emails(limit: int = 100) -> int:
    """Move up to ``limit`` recorded sales from the market's outbox into the e-mail queue."""
    return market.relay_sales(enqueue_sold_email, limit)


def relay_all_sold_emails(batch: int = 100) -> int:
    """Relay batches until the outbox is empty (or a batch comes back short); return how many."""
    relayed = 0
    while (count := relay_sold_emails(batch)) == batch:
        relayed += count
    return relayed + count
