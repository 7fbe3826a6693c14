"""Sentences for people about why the site or a service said no.

Every page that shows a service error goes through ``refusal()``, so a person reads
"A guild name cannot contain ':'." rather than the exception's text
("invalid guild 'a:b': the character ':' is not allowed"), which is written for
programmers and logs.
"""

import re

from redisparts_app.exceptions import (
    ChatNotFound,
    InsufficientFunds,
    InvalidArgument,
    InvalidPrice,
    ItemAlreadyHeld,
    ItemNotHeld,
    ListingNotFound,
    MailMessageNotFound,
    MarketBusy,
    NotChatMember,
    OwnItem,
    PriceChanged,
    UnknownUser,
    UserExists,
)

from .money import format_cents

__all__ = ["field_name", "refusal"]

# What a person calls each ``field`` the services and the site's validators name.
FIELD_NAMES = {
    "guild": "A guild name",
    "prefix": "A name",
    "recipient": "A recipient's name",
    "member": "A member's name",
    "user": "A user name",
    "username": "A user name",
    "seller": "A seller's name",
    "buyer": "A buyer's name",
    "item": "An item name",
    "chat": "A chat name",
    "message": "A message",
    "subject": "A subject",
    "body": "A message",
    "price": "A price",
}

_FORBIDDEN = re.compile(r"the character (.+) is not allowed")
_CONTROL = re.compile(r"control (?:or whitespace )?character")
_TOO_LONG_KEY = re.compile(r"longer than (\d+) characters")
_TOO_LONG_TEXT = re.compile(r"(\d+) characters; shorten it to at most (\d+)")


def field_name(field: str) -> str:
    """``field`` as the subject of a sentence: "guild" -> "A guild name"."""
    return FIELD_NAMES.get(field, f"The {field}")


def _invalid_argument(exc: InvalidArgument) -> str:
    name, reason = field_name(exc.field), exc.reason
    if match := _FORBIDDEN.search(reason):
        return f"{name} cannot contain {match.group(1)}."
    if _CONTROL.search(reason):
        return f"{name} cannot contain control characters, tabs or line breaks."
    if match := _TOO_LONG_TEXT.search(reason):
        limit = int(match.group(2))
        return f"{name} can be at most {limit:,} characters long (this one has {match.group(1)})."
    if match := _TOO_LONG_KEY.search(reason):
        return f"{name} can be at most {match.group(1)} characters long."
    if "must not be empty" in reason:
        return f"{name} cannot be empty."
    if "start or end with a space" in reason:
        return f"{name} cannot start or end with a space."
    if reason.startswith("must be a string"):
        return f"{name} must be text."
    return f"{name} is not accepted: {reason}."


def refusal(exc: Exception) -> str:
    """A sentence for a person about ``exc``, a service's refusal or a bad argument."""
    if isinstance(exc, PriceChanged):
        return (
            f"The price of {exc.item} changed to {format_cents(exc.actual)} "
            f"(you saw {format_cents(exc.expected)}). Check the new price and buy again."
        )
    if isinstance(exc, InsufficientFunds):
        return (
            f"Not enough funds: you have {format_cents(exc.funds)}, "
            f"it costs {format_cents(exc.price)}."
        )
    if isinstance(exc, ListingNotFound):
        return f"{exc.item} by {exc.seller} is no longer on the market (sold or withdrawn)."
    if isinstance(exc, OwnItem):
        return f"{exc.item} is your own listing; cancel it instead of buying it."
    if isinstance(exc, UnknownUser):
        return f"{exc.user} has no market account."
    if isinstance(exc, UserExists):
        return "You already have a market account."
    if isinstance(exc, ItemAlreadyHeld):
        return f"You already have an item named {exc.item}; sell it before buying another."
    if isinstance(exc, ItemNotHeld):
        return f"{exc.item} is not in your inventory (sold or already listed?)."
    if isinstance(exc, MarketBusy):
        return "The market is busy right now; try again in a moment."
    if isinstance(exc, InvalidPrice):
        return "That price is not a valid amount; reload the page and try again."
    if isinstance(exc, ChatNotFound):
        return "There is no such chat (it ended when its last member left)."
    if isinstance(exc, NotChatMember):
        return "You are no longer a member of this chat."
    if isinstance(exc, MailMessageNotFound):
        return "There is no such message in your mailbox."
    if isinstance(exc, InvalidArgument):
        return _invalid_argument(exc)
    text = str(exc).strip() or "That did not work."
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
