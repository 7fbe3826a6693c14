"""The demo's accounts and what they own: the landing page shows them, load_demo seeds them.

Money is in cents. Passwords are public on purpose: this is a demo.

``load_demo`` is idempotent: each part is seeded only where it is missing (a Django user
that does not exist yet, a market account not opened yet, a guild without members, the
tavern chat not created yet), so a second run changes nothing and a run after people
have used the site leaves their trades, guilds and messages alone.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import transaction

from redisparts_app.exceptions import ChatExists, UserExists
from redisparts_app.services import market
from redisparts_app.services.autocomplete import AddressBook, RecentContacts
from redisparts_app.services.chat import create_chat, send_message
from redisparts_app.services.mail import Mailbox
from redisparts_app.services.presence import add_friend, friends

EMAIL_DOMAIN = "redisparts.test"


@dataclass(frozen=True)
class DemoAccount:
    username: str
    password: str
    funds: int
    items: tuple[str, ...]
    staff: bool = False


ACCOUNTS: tuple[DemoAccount, ...] = (
    DemoAccount("alice", "alice-demo", 50_000, ("Silver sword", "Oak shield", "Lantern")),
    DemoAccount("bob", "bob-demo", 30_000, ("Healing potion", "Leather boots", "Map of Vell")),
    DemoAccount("carol", "carol-demo", 40_000, ("Iron helmet", "Bow", "Quiver of arrows")),
    DemoAccount("dave", "dave-demo", 20_000, ("Rope", "Compass", "Spyglass")),
    DemoAccount("admin", "admin-demo", 100_000, ("Crown",), staff=True),
)

# (seller, item, price in cents) put on the market.
LISTINGS: tuple[tuple[str, str, int], ...] = (
    ("alice", "Lantern", 1_250),
    ("bob", "Healing potion", 450),
    ("bob", "Map of Vell", 3_900),
    ("carol", "Bow", 7_500),
    ("dave", "Spyglass", 2_200),
)

# guild -> members (guild member names are the usernames, so mail can reach them).
GUILDS: dict[str, tuple[str, ...]] = {
    "Knights": ("alice", "bob", "carol", "admin"),
    "Traders": ("bob", "carol", "dave"),
}

FRIENDSHIPS: tuple[tuple[str, str], ...] = (
    ("alice", "bob"),
    ("alice", "carol"),
    ("bob", "dave"),
    ("carol", "dave"),
)

CHAT_ID = "tavern"
CHAT_MEMBERS: tuple[str, ...] = ("alice", "bob", "carol")
CHAT_HISTORY: tuple[tuple[str, str], ...] = (
    ("alice", "Evening all. Anyone selling arrows?"),
    ("carol", "I have a quiver, make me an offer."),
    ("bob", "Potions are on the market at 4.50 if you are heading out."),
)

# (sender, recipient, subject, body)
MAILS: tuple[tuple[str, str, str, str], ...] = (
    ("bob", "alice", "Guild meeting", "Meeting at the hall on Friday. Bring the lantern."),
    ("carol", "alice", "Your bow offer", "Still interested in the bow? It is listed at 75.00."),
    ("alice", "bob", "Re: potions", "Two potions for the road, please."),
)


@dataclass
class LoadReport:
    """What one load created (all zero on a second run)."""

    users: int = 0
    market_accounts: int = 0
    listings: int = 0
    guilds: int = 0
    friendships: int = 0
    chats: int = 0
    mails: int = 0
    skipped: list[str] = field(default_factory=list)


def steps() -> list[tuple[str, Callable[[LoadReport], None]]]:
    """The load's steps in order, named for a progress bar."""
    return [
        ("users", _load_users),
        ("market", _load_market),
        ("guilds", _load_guilds),
        ("friends", _load_friends),
        ("chat and mail", _load_conversations),
    ]


def load(progress: Callable[[str], None] = lambda name: None) -> LoadReport:
    """Seed everything that is missing; return what was created."""
    report = LoadReport()
    for name, step in steps():
        progress(name)
        step(report)
    return report


def _load_users(report: LoadReport) -> None:
    users = get_user_model()
    with transaction.atomic():
        for account in ACCOUNTS:
            if users.objects.filter(username=account.username).exists():
                continue
            user = users(
                username=account.username,
                email=f"{account.username}@{EMAIL_DOMAIN}",
                is_staff=account.staff,
                is_superuser=account.staff,
            )
            user.set_password(account.password)
            user.save()
            report.users += 1


def _load_market(report: LoadReport) -> None:
    for account in ACCOUNTS:
        try:
            market.create_user(account.username, account.funds)
        except UserExists:
            report.skipped.append(f"market account {account.username}")
            continue
        report.market_accounts += 1
        for item in account.items:
            market.give_item(account.username, item)
        for seller, item, price in LISTINGS:
            if seller == account.username:
                market.list_item(seller, item, price)
                report.listings += 1


def _load_guilds(report: LoadReport) -> None:
    for guild, members in GUILDS.items():
        book = AddressBook(guild)
        if len(book):
            report.skipped.append(f"guild {guild}")
            continue
        book.join_many(members)
        report.guilds += 1


def _load_friends(report: LoadReport) -> None:
    for user, friend in FRIENDSHIPS:
        if friend not in friends(user):
            add_friend(user, friend)
            report.friendships += 1


def _load_conversations(report: LoadReport) -> None:
    (first_sender, first_text), *rest = CHAT_HISTORY
    recipients = [member for member in CHAT_MEMBERS if member != first_sender]
    try:
        create_chat(first_sender, recipients, first_text, chat_id=CHAT_ID)
    except ChatExists:
        # The conversations were seeded with the chat; seeding them again would repeat them.
        report.skipped.append(f"chat {CHAT_ID} and the demo mail")
        return
    report.chats += 1
    for sender, text in rest:
        send_message(CHAT_ID, sender, text)
    for sender, recipient, subject, body in MAILS:
        Mailbox(recipient).send(sender, subject, body)
        # Whom you wrote to comes first in your recipient fields.
        RecentContacts(sender).add(recipient)
        report.mails += 1
