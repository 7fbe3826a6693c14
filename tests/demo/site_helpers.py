"""Helpers of the demo site's tests: logged-in clients and snapshots of the data in Redis."""

import re

from django.test import Client

# Keys any request may write: logs, counters, response-time stats and the registries of
# their names, sessions, presence (not friend lists), rate limits (a refused login attempt
# still counts).
BOOKKEEPING = re.compile(
    rb"^[^:]+:(log|counter|counters|stats|stats_rank|session|ratelimit):"
    rb"|^[^:]+:registry:\{(log|stats)\}:"
    rb"|^[^:]+:presence:\{presence\}:(minute|seen|devices)(:|$)"
)
# A request that reaches the market holds one of the account's semaphore permits while
# the service decides; the permit's counter and wake-up list change even when the
# market refuses. Left out of the comparison only for refusals answered by a redirect.
GUARDS = re.compile(rb"^[^:]+:(semaphore:|registry:\{semaphore\}:)")
# A form error or an error message on a page.
ERROR = re.compile(r'class="[^"]*\b(errorlist|error|field-errors)\b')


def data_snapshot(client, ignore: re.Pattern | None = None) -> dict[bytes, bytes]:
    """Type and serialized value of every key but the bookkeeping ones (and ``ignore``)."""
    snapshot = {}
    for key in client.scan_iter(count=1000):
        if BOOKKEEPING.match(key) or (ignore is not None and ignore.match(key)):
            continue
        snapshot[key] = client.type(key) + b"=" + (client.dump(key) or b"")
    return snapshot


def client_for(user: str | None, **defaults) -> Client:
    """A test client logged in as demo user ``user``, or anonymous for None."""
    client = Client(**defaults)
    if user is not None:
        assert client.login(username=user, password=f"{user}-demo")
    return client
