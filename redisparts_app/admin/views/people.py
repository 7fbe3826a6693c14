"""The market, mail, presence and GeoIP: figures, a page of entries, and a look-up by name.

Nothing here lists every user (that would read the whole keyspace): a page shows what a
service keeps in order (listings by price, the outbox, who is online) and looks one user,
mailbox or address up by the name typed in.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse

from ...exceptions import RedisPartsError, UnknownUser
from ...services import geoip, market, presence
from ...services.mail import Mailbox, MailPage
from .paging import (
    LISTINGS_PER_PAGE,
    MAIL_PER_PAGE,
    ONLINE_PER_PAGE,
    counted_page,
    offset_page,
)

__all__ = ["SALES_SHOWN", "geoip_lookup", "mailbox", "market_overview", "online"]

if TYPE_CHECKING:
    from .. import RedisPartsAdmin

T = TypeVar("T")
SALES_SHOWN = 20  # sales waiting in the outbox, oldest first
MAX_LOOKUP_LENGTH = 200


def market_overview(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    pages = offset_page(request, market.count_listings(), LISTINGS_PER_PAGE)
    user, account, error = _look_up(request, "user", _account)
    try:
        sales, unreadable = market.pending_sales(SALES_SHOWN), ""
    except ValueError as exc:  # a record the relay cannot read either: it stays, shown here
        sales, unreadable = [], str(exc)
    context = {
        "title": "Market",
        "listings": market.get_listings(pages["start"], LISTINGS_PER_PAGE),
        "pages": pages,
        "pending": market.count_pending_sales(),
        "sales": sales,
        "unreadable": unreadable,
        "looked_up": user,  # not "user": the admin's header names the signed-in user
        "account": account,
        "error": error,
    }
    return model_admin.render(request, "market.html", context, live=not user)


def mailbox(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    user, box, error = _look_up(request, "user", Mailbox)
    context: dict[str, Any] = {"title": "Mail", "looked_up": user, "error": error}
    if box is not None:
        mail, pages = counted_page(request, _mail_page(box), MAIL_PER_PAGE)
        context |= {
            "mail": mail,
            "pages": pages,
            "query_prefix": urlencode({"user": user}) + "&",
        }
    return model_admin.render(request, "mail.html", context)


def online(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    users, pages = counted_page(request, presence.online_page, ONLINE_PER_PAGE)
    user, friendship, error = _look_up(request, "user", _friendship)
    context = {
        "title": "Presence",
        "users": users,
        "pages": pages,
        "looked_up": user,
        "friendship": friendship,
        "error": error,
    }
    return model_admin.render(request, "presence.html", context, live=not user)


def geoip_lookup(model_admin: "RedisPartsAdmin", request: HttpRequest) -> HttpResponse:
    blocks, cities = geoip.counts()
    ip, found, error = _look_up(request, "ip", lambda ip: (geoip.find_city(ip),))
    context = {
        "title": "GeoIP",
        "blocks": blocks,
        "cities": cities,
        "ip": ip,
        "city": found[0] if found else None,
        "error": error,
    }
    return model_admin.render(request, "geoip.html", context)


def _look_up(
    request: HttpRequest, param: str, find: Callable[[str], T]
) -> tuple[str, T | None, str]:
    """Query parameter ``param``, what ``find`` gives for it, and the error to show by it."""
    value = request.GET.get(param, "").strip()
    if not value:
        return "", None, ""
    if len(value) > MAX_LOOKUP_LENGTH:
        return value[:MAX_LOOKUP_LENGTH], None, f"At most {MAX_LOOKUP_LENGTH} characters."
    try:
        return value, find(value), ""
    except UnknownUser:
        return value, None, f"There is no market user named {value}."
    except (RedisPartsError, ValueError) as exc:
        return value, None, str(exc)


def _mail_page(box: Mailbox) -> Callable[[int, int], tuple[MailPage, int]]:
    def read(start: int, count: int) -> tuple[MailPage, int]:
        page = box.fetch(start, count)
        return page, page.total

    return read


def _account(user: str) -> dict[str, Any]:
    return {"funds": market.get_funds(user), "inventory": market.get_inventory(user)}


def _friendship(user: str) -> dict[str, Any]:
    friends = presence.friends(user)
    return {
        "online": presence.is_online(user),
        "friends": sorted(friends),
        "online_friends": sorted(presence.online_friends(user)) if friends else [],
    }
