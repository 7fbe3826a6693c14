"""Tasks of the demo site, run by ``manage.py rp_worker email`` (rp_worker imports this module).

``send_sold_email`` tells a seller their item sold, through Django's e-mail API (in the demo
the file backend writes it to var/outbox/, which the Outbox page lists). Delivery is at least
once: a worker killed after sending and before acknowledging sends it again when the task
is recovered.
"""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail

from redisparts_app.services.tasks import task

from .demo_data import EMAIL_DOMAIN
from .forms import format_cents


def email_address(username: str) -> str:
    """The user's e-mail address, or a demo address made from the name."""
    user = get_user_model().objects.filter(username=username).first()
    return (user.email if user is not None and user.email else "") or f"{username}@{EMAIL_DOMAIN}"


@task(name="marketplace.send_sold_email", queue="email", max_retries=5)
def send_sold_email(seller: str, item: str, price: int, buyer: str) -> None:
    """E-mail ``seller`` that ``buyer`` bought ``item`` for ``price`` cents."""
    send_mail(
        subject=f"Your {item} sold for {format_cents(price)}",
        message=(
            f"Hello {seller},\n\n{buyer} bought your {item} on the market for "
            f"{format_cents(price)}. The money is in your account.\n\n"
            "The redisparts market"
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[email_address(seller)],
    )
