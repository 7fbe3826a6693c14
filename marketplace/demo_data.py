"""The demo's accounts and what they own: the landing page shows them, load_demo seeds them.

Money is in cents. Passwords are public on purpose: this is a demo.
"""

from dataclasses import dataclass


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
    "Knights of Vell": ("alice", "bob", "carol", "admin"),
    "Night Traders": ("bob", "carol", "dave"),
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


def account(username: str) -> DemoAccount | None:
    return next((a for a in ACCOUNTS if a.username == username), None)
