"""Rate limits of the demo site: login attempts, chat messages and guild mail.

``MARKETPLACE["RATE_LIMITS"]`` maps each scope to ``(events, seconds)``. Login attempts
count per account name and client address, so one client guessing passwords is stopped
without locking the account's owner out elsewhere; messages count per sender. A refused
request gets 429 with a Retry-After header: a page, a fragment for htmx requests, or the
form the person filled in, with the reason as its error (nothing typed is lost).
"""

import functools
import math
import unicodedata
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.html import format_html
from django.utils.safestring import SafeString

from redisparts_app.services.ratelimit import Decision, RateLimit


def rate_limit(scope: str) -> RateLimit:
    """The limiter of ``scope`` ("login", "chat" or "mail") as the settings give it."""
    events, seconds = settings.MARKETPLACE["RATE_LIMITS"][scope]
    return RateLimit(scope, events, seconds)


def retry_seconds(decision: Decision) -> int:
    """Whole seconds until the refused request may be tried again (at least 1)."""
    return max(1, math.ceil(decision.retry_after))


def retry_sentence(message: str, seconds: int) -> SafeString:
    """``message`` and when to try again, as the 429 page, fragment and forms say it.

    The wait is a timer that site.js counts down; without JavaScript it says the wait
    as it was when the page was made.
    """
    return format_html(
        '{} Try again <span role="timer" data-retry-seconds="{}">in {} second{}</span>.',
        message,
        seconds,
        seconds,
        "" if seconds == 1 else "s",
    )


def too_many_requests(
    request: HttpRequest,
    decision: Decision,
    message: str,
    form_page: Callable[[str], HttpResponse] | None = None,
) -> HttpResponse:
    """429 with Retry-After (whole seconds) and ``message``: an htmx fragment for htmx
    requests, else ``form_page(sentence)`` when given (the form re-rendered with the
    reason as its error), else a page."""
    seconds = retry_seconds(decision)
    htmx = request.headers.get("HX-Request") == "true"
    if form_page is not None and not htmx:
        response = form_page(retry_sentence(message, seconds))
        response.status_code = 429
    else:
        template = "_429.html" if htmx else "429.html"
        context = {"sentence": retry_sentence(message, seconds), "back": request.path}
        response = render(request, template, context, status=429)
    response["Retry-After"] = str(seconds)
    return response


def client_address(request: HttpRequest) -> str:
    """The client's address: from MARKETPLACE["CLIENT_ADDRESS_HEADER"] when a proxy in front
    sets it (behind a proxy REMOTE_ADDR is the proxy's), else REMOTE_ADDR."""
    header = settings.MARKETPLACE.get("CLIENT_ADDRESS_HEADER")
    from_proxy = request.headers.get(header, "").strip() if header else ""
    return from_proxy or request.META.get("REMOTE_ADDR", "")


def login_subject(request: HttpRequest) -> str:
    """The account name as the login form reads it (NFKC, stripped), casefolded, and the
    client address: spelling variants of one name share one count."""
    name = unicodedata.normalize("NFKC", request.POST.get("username", "")).strip().casefold()
    return f"{name}\n{client_address(request)}"


def login_rate_limited(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Count every login POST of ``view``; answer 429 past the "login" limit."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method == "POST":
            decision = rate_limit("login").hit(login_subject(request))
            if not decision.allowed:
                message = "Too many login attempts for this account from your address."
                return too_many_requests(request, decision, message)
        return view(request, *args, **kwargs)

    return wrapper


def sending_refused(
    request: HttpRequest,
    scope: str,
    what: str,
    form_page: Callable[[str], HttpResponse] | None = None,
) -> HttpResponse | None:
    """Count one message of the user in ``scope``; the 429 answer past the limit, else None.

    ``form_page``: see ``too_many_requests``.
    """
    decision = rate_limit(scope).hit(request.user.get_username())
    if decision.allowed:
        return None
    return too_many_requests(request, decision, f"You are sending {what} too fast.", form_page)
