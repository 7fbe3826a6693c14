"""Pages of the demo site (the guild, mail and chat pages live in marketplace.social)."""

from .account import login
from .errors import bad_request
from .friends import friend_add, friend_remove, friends
from .home import home
from .market import market, market_buy, market_cancel, market_join, market_list
from .outbox import outbox
from .stats import stats

__all__ = [
    "bad_request",
    "friend_add",
    "friend_remove",
    "friends",
    "home",
    "login",
    "market",
    "market_buy",
    "market_cancel",
    "market_join",
    "market_list",
    "outbox",
    "stats",
]
