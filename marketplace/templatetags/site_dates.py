"""The one way the demo site writes a moment: "Nov 29, 03:15" (the site's time zone, UTC).

Use: ``{% load site_dates %}``, then ``<time datetime="{{ x|date:'c' }}">{{ x|site_date }}</time>``.
"""

from datetime import UTC, datetime

from django import template
from django.utils import dateformat, timezone

__all__ = ["SITE_DATE", "site_date"]

SITE_DATE = "M j, H:i"

register = template.Library()


@register.filter
def site_date(value: datetime | None) -> str:
    """``value`` as the site writes dates ("" for None)."""
    if value is None:
        return ""
    if timezone.is_naive(value):  # e.g. an e-mail's Date with the unknown zone "-0000"
        value = timezone.make_aware(value, UTC)
    return dateformat.format(timezone.localtime(value), SITE_DATE)
