"""What the load test's simulated users are: their pace, and their accounts (one each,
with funds, items and a group chat).

Shared by the runner, which seeds the accounts, and the locustfile, whose users log in
with them; this module imports neither locust nor Django at the top.
"""

# Seconds a simulated user waits between two clicks (uniform).
THINK_SECONDS = (0.5, 2.0)
# Simulated users started per second: people do not all log in at the same moment.
SPAWN_RATE = 2
# Beside the people, one monitoring scraper reads /metrics and /health/ this often (s).
SCRAPE_SECONDS = 15

PASSWORD = "load-test-password"  # noqa: S105 - public, like the demo's passwords
# Cents: enough for every purchase of a run.
FUNDS = 1_000_000
ITEMS_PER_ACCOUNT = 6
LISTED_PER_ACCOUNT = 2
# Users per group chat.
CHAT_SIZE = 5
# The chat page's requests as the report names them: its event stream (ASGI), each
# message's delivery through it (send to receipt), its poll (WSGI).
EVENTS = "/chat/[id]/events/"
DELIVERY = "/chat/[id]/events/ (send to receipt)"
POLL = "/chat/[id]/poll/"


def username(number: int) -> str:
    """The account of simulated user ``number`` (1, 2, ...)."""
    return f"load{number:02d}"


def chat_id(number: int) -> str:
    """The group chat of simulated user ``number``: users 1-5 share one, 6-10 the next..."""
    return f"load-{(number - 1) // CHAT_SIZE + 1}"


def seed(count: int) -> None:
    """Create ``count`` accounts (site users and market accounts), listings and chats.

    Expects a fresh Redis; the site users are reused when the database has them.
    """
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    from marketplace.demo_data import EMAIL_DOMAIN
    from redisparts_app.services import market
    from redisparts_app.services.chat import create_chat

    # One hash for all: hashing is slow on purpose, and these passwords are public anyway.
    hashed = make_password(PASSWORD)
    users = get_user_model()
    for number in range(1, count + 1):
        name = username(number)
        users.objects.get_or_create(
            username=name, defaults={"password": hashed, "email": f"{name}@{EMAIL_DOMAIN}"}
        )
        market.create_user(name, FUNDS)
        items = [f"Crate {k} of {name}" for k in range(1, ITEMS_PER_ACCOUNT + 1)]
        for item in items:
            market.give_item(name, item)
        for k, item in enumerate(items[:LISTED_PER_ACCOUNT], start=1):
            market.list_item(name, item, 100 * (k + number % 7))
    for first in range(1, count + 1, CHAT_SIZE):
        members = [username(n) for n in range(first, min(first + CHAT_SIZE, count + 1))]
        create_chat(members[0], members[1:], "Welcome to the load test.", chat_id=chat_id(first))
