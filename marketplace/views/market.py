"""Market pages: listings cheapest first, buy, list an item, cancel, funds and inventory.

Every change runs inside the account's market semaphore (at most
MARKETPLACE["MAX_CONCURRENT_OPERATIONS"] at once per account); a full semaphore is a
message, not an error. Malformed input answers 400 with a message; refusals from the
market (price changed, not enough funds, sold meanwhile...) are messages on the page.

A purchase records its sale in the market's outbox in the same atomic step, so the
seller's e-mail cannot be lost; right after it, the view relays that sale into the e-mail
queue (the fast path; ``manage.py market_relay`` relays whatever this misses). Once the
purchase committed, a Redis error (the relay, the permit's release) is logged and the
buyer sees the success: it is never a 503 for a purchase that went through.
"""

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from redisparts_app.exceptions import MarketError, RedisPartsError, UnknownUser, UserExists
from redisparts_app.services import market as market_service
from redisparts_app.services.semaphores import FairSemaphore

from ..forms import BuyForm, CancelForm, ListItemForm, error_text, format_cents
from ..refusals import refusal
from ..tasks import enqueue_sold_email
from .errors import bad_request

logger = logging.getLogger("marketplace")

# Funds of a market account opened from the site (cents).
STARTING_FUNDS = 10_000


def site_setting(name: str):
    return settings.MARKETPLACE[name]


class Busy(Exception):
    """The account's market semaphore is full."""


@contextmanager
def market_operation(username: str, what: str) -> Iterator[None]:
    """Hold one of the account's market-operation permits, or raise Busy."""
    semaphore = FairSemaphore(
        f"market-{username}",
        site_setting("MAX_CONCURRENT_OPERATIONS"),
        timeout=site_setting("OPERATION_TIMEOUT"),
    )
    holder = semaphore.acquire(reason=what[:200])
    if holder is None:
        raise Busy
    try:
        yield
    finally:
        semaphore.release(holder)


BUSY_MESSAGE = (
    "You already have {n} market operations under way; wait for one to finish and try again."
)


def _operate(
    request: HttpRequest, what: str, action: Callable[[], object], done: str
) -> HttpResponse:
    """Run ``action`` under the user's market semaphore; report the outcome as a message.

    A Redis error after ``action`` returned (releasing the permit) is logged and the
    outcome is still the success: the change was made.
    """
    committed = False
    try:
        with market_operation(request.user.get_username(), what):
            action()
            committed = True
    except Busy:
        limit = site_setting("MAX_CONCURRENT_OPERATIONS")
        messages.warning(request, BUSY_MESSAGE.format(n=limit))
    except MarketError as exc:
        messages.error(request, refusal(exc))
    except redis.RedisError:
        if not committed:
            raise
        # The permit expires by itself after OPERATION_TIMEOUT.
        logger.warning("%s: done, but releasing its permit failed", what, exc_info=True)
        messages.success(request, done)
    else:
        messages.success(request, done)
    return redirect("market")


def _page_number(request: HttpRequest) -> int | None:
    raw = request.GET.get("page", "1")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 6 or int(raw) < 1:
        return None
    return int(raw)


@login_required
@require_GET
def market(request: HttpRequest) -> HttpResponse:
    page = _page_number(request)
    if page is None:
        message = "The page number must be a whole number from 1."
        return bad_request(request, message, back="/market/")
    username = request.user.get_username()
    size = site_setting("PAGE_SIZE")
    return render(request, "marketplace/market.html", _context(request, username, page, size))


def _context(request, username, page, size, form=None):
    total = market_service.count_listings()
    pages = max(1, -(-total // size))
    page = min(page, pages)
    listings = market_service.get_listings(offset=(page - 1) * size, limit=size)
    try:
        funds = market_service.get_funds(username)
        inventory = market_service.get_inventory(username)
    except UnknownUser:
        funds, inventory = None, []
    if form is None:
        form = ListItemForm(inventory=inventory)
    return {
        "listings": [
            {
                "item": row.item,
                "seller": row.seller,
                "price": row.price,
                "shown_price": format_cents(row.price),
                "own": row.seller == username,
                # The server still refuses a purchase beyond the funds; this only says so
                # before the click.
                "affordable": funds is not None and row.price <= funds,
            }
            for row in listings
        ],
        "funds": None if funds is None else format_cents(funds),
        "has_account": funds is not None,
        "inventory": inventory,
        "form": form,
        "page": page,
        "pages": pages,
        "total": total,
        "offset": (page - 1) * size,
    }


def complete_purchase(buyer: str, item: str, seller: str, price: int) -> market_service.Sale:
    """Buy (the sale and its e-mail record commit together), then relay the e-mail at once.

    Raise a MarketError when the purchase is refused. A failure of the relay is logged
    and leaves the record in the outbox for ``market_relay``; the purchase stands.
    """
    sale = market_service.purchase(buyer, item, seller, price).sale
    logger.info("%s bought %s from %s for %s", buyer, item, seller, format_cents(price))
    try:
        market_service.relay_sale(sale, enqueue_sold_email)
    except (redis.RedisError, RedisPartsError):
        logger.warning("sale %s: relaying its e-mail failed", sale.sale_id, exc_info=True)
    return sale


@login_required
@require_POST
def market_buy(request: HttpRequest) -> HttpResponse:
    form = BuyForm(request.POST)
    if not form.is_valid():
        return bad_request(request, f"Cannot buy: {error_text(form)}", back="/market/")
    buyer = request.user.get_username()
    seller, item, price = (form.cleaned_data[k] for k in ("seller", "item", "price"))

    def buy() -> None:
        complete_purchase(buyer, item, seller, price)

    done = (
        f"You bought {item} from {seller} for {format_cents(price)}. "
        f"{seller} gets an e-mail about the sale."
    )
    return _operate(request, f"buy {item} from {seller}", buy, done)


@login_required
@require_POST
def market_list(request: HttpRequest) -> HttpResponse:
    username = request.user.get_username()
    try:
        inventory = market_service.get_inventory(username)
    except UnknownUser:
        return bad_request(request, "Open a market account first.", back="/market/")
    form = ListItemForm(request.POST, inventory=inventory)
    if not form.is_valid():
        page_size = site_setting("PAGE_SIZE")
        context = _context(request, username, 1, page_size, form=form)
        return render(request, "marketplace/market.html", context, status=400)
    item, price = form.cleaned_data["item"], form.cleaned_data["price"]
    return _operate(
        request,
        f"list {item}",
        lambda: market_service.list_item(username, item, price),
        f"{item} is on the market for {format_cents(price)}.",
    )


@login_required
@require_POST
def market_cancel(request: HttpRequest) -> HttpResponse:
    form = CancelForm(request.POST)
    if not form.is_valid():
        return bad_request(request, f"Cannot cancel: {error_text(form)}", back="/market/")
    username, item = request.user.get_username(), form.cleaned_data["item"]
    return _operate(
        request,
        f"cancel {item}",
        # The listing is addressed by its seller: only your own can be cancelled.
        lambda: market_service.cancel_listing(username, item),
        f"{item} is back in your inventory.",
    )


@login_required
@require_POST
def market_join(request: HttpRequest) -> HttpResponse:
    """Open a market account for a site user who has none (e.g. one made in the admin)."""
    username = request.user.get_username()
    try:
        market_service.create_user(username, STARTING_FUNDS)
    except UserExists:
        messages.info(request, "You already have a market account.")
    except ValueError as exc:
        message = f"Cannot open a market account: {refusal(exc)}"
        return bad_request(request, message, back="/market/")
    else:
        messages.success(
            request, f"Your market account is open with {format_cents(STARTING_FUNDS)}."
        )
    return redirect("market")
