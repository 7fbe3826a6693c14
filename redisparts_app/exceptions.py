"""Errors raised on purpose by redisparts_app.

Import: ``from redisparts_app.exceptions import RedisPartsError, InvalidArgument``.
"""

from typing import Any

__all__ = [
    "BackupError",
    "ChatExists",
    "ChatNotFound",
    "ChatPushGap",
    "CompletionConflict",
    "ComponentConnectionError",
    "ConnectionNotConfigured",
    "CorruptFile",
    "DistributionTimeout",
    "EmbeddedServerError",
    "FileDistributionError",
    "FileTooLarge",
    "GeoIPImportError",
    "InsufficientFunds",
    "InvalidArgument",
    "InvalidArgumentType",
    "InvalidConfig",
    "InvalidKeyPart",
    "InvalidMessage",
    "InvalidPrice",
    "InvalidTask",
    "ItemAlreadyHeld",
    "ItemListed",
    "ItemNotHeld",
    "ListingNotFound",
    "LockNotOwned",
    "LockTimeout",
    "LogProgressConflict",
    "MailMessageNotFound",
    "MarketBusy",
    "MarketError",
    "NotChatMember",
    "OwnItem",
    "PriceChanged",
    "RedisPartsError",
    "ReplicationTimeout",
    "ResultTimeout",
    "ScheduleNotFound",
    "SemaphoreFull",
    "SemaphoreLost",
    "SemaphoreTimeout",
    "ServerBinaryNotFound",
    "SoftTimeLimitExceeded",
    "TaskAborted",
    "TaskCancelled",
    "TaskExpired",
    "TaskFailed",
    "TaskNotFound",
    "TaskNotReplicated",
    "UnknownStrategy",
    "UnknownUser",
    "UserExists",
    "shorten",
]


class RedisPartsError(Exception):
    """Base class for errors raised on purpose by redisparts_app."""


def shorten(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters, so a huge input is not echoed in full."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class InvalidArgument(RedisPartsError, ValueError):
    """An argument was refused before anything reached Redis.

    ``field`` names the argument ("limit", "lock ttl", "user"), ``value`` is what was
    given and ``reason`` says what would be accepted ("must be an integer from 1 to 1000").
    The message quotes the value (shortened) unless ``show_value`` is false, as for
    message text that may be long or private.
    """

    def __init__(self, field: str, value: object, reason: str, *, show_value: bool = True) -> None:
        self.field, self.value, self.reason = field, value, reason
        shown = f" {shorten(repr(value))}" if show_value else ""
        super().__init__(f"invalid {field}{shown}: {shorten(reason, 200)}")

    @property
    def kind(self) -> str:
        """The argument's name: ``field`` under the name InvalidKeyPart used."""
        return self.field


class InvalidArgumentType(InvalidArgument, TypeError):
    """An argument of the wrong type (a string for a number, a bool for a count...).

    Also a TypeError, so code that catches TypeError for a wrong type keeps working.
    """


# Deprecated names kept while code outside the core still imports them; use InvalidArgument.
InvalidKeyPart = InvalidArgument
InvalidConfig = InvalidArgument


class InvalidMessage(InvalidArgument):
    """Deprecated: raise InvalidArgument(field, value, reason) instead.

    Kept with its old signature ``(field, reason)`` for callers outside the core.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(field, None, reason, show_value=False)


class ConnectionNotConfigured(RedisPartsError):
    """A connection alias is missing from REDISPARTS["CONNECTIONS"] or malformed."""


class ServerBinaryNotFound(RedisPartsError):
    """No redis-server executable could be found for an embedded or test server."""


class EmbeddedServerError(RedisPartsError):
    """The embedded redis-server could not be started, reached or stopped."""


class GeoIPImportError(RedisPartsError):
    """A GeoIP import could not run (unknown CSV layout, no usable row); old data stays."""


class ComponentConnectionError(RedisPartsError):
    """The stored ``redis`` configuration of a component cannot build a client."""


class MailMessageNotFound(RedisPartsError, LookupError):
    """No message with this id in the mailbox (never sent, deleted or trimmed)."""

    def __init__(self, user: str, message_id: int) -> None:
        self.user, self.message_id = user, message_id
        super().__init__(f"no message {message_id} in the mailbox of {user!r}")


class ChatNotFound(RedisPartsError, LookupError):
    """The chat does not exist (never created, or deleted when its last member left)."""

    def __init__(self, chat_id: str) -> None:
        self.chat_id = chat_id
        super().__init__(f"no chat {chat_id!r}")


class ChatExists(RedisPartsError):
    """A chat was created with an id that is already in use."""

    def __init__(self, chat_id: str) -> None:
        self.chat_id = chat_id
        super().__init__(f"chat {chat_id!r} already exists; pick another id")


class ChatPushGap(RedisPartsError, LookupError):
    """The push stream cannot resume after ``last_id``: messages after it have left the
    stream (it is capped by CHAT_PUSH_LENGTH), or the chat has no such message (its next
    is ``first_id``). Read the chat again (history and pending messages) instead."""

    def __init__(self, chat_id: str, last_id: int, first_id: int) -> None:
        self.chat_id, self.last_id, self.first_id = chat_id, last_id, first_id
        if last_id >= first_id:
            gap = f"chat {chat_id!r} has no message {last_id} (its last is {first_id - 1})"
        else:
            gap = f"messages {last_id + 1} to {first_id - 1} of chat {chat_id!r} have left the "
            gap += "push stream"
        super().__init__(f"{gap}; read the chat again rather than resuming")


class NotChatMember(RedisPartsError, PermissionError):
    """Only members read or post in a chat."""

    def __init__(self, chat_id: str, user: str) -> None:
        self.chat_id, self.user = chat_id, user
        super().__init__(f"{user!r} is not a member of chat {chat_id!r}")


class FileDistributionError(RedisPartsError):
    """File distribution through Redis failed."""


class FileTooLarge(FileDistributionError, ValueError):
    """A file is larger than the byte limit, so it could never be held in Redis."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        self.path, self.size, self.limit = path, size, limit
        super().__init__(
            f"{path} is {size} bytes, more than the limit of {limit} bytes held in Redis; "
            "raise the limit"
        )


class CorruptFile(FileDistributionError):
    """A distributed file's bytes do not match its SHA-256, are missing, or do not decompress."""

    def __init__(self, name: str, reason: str) -> None:
        self.name, self.reason = name, reason
        super().__init__(f"file {name!r}: {reason}")


class DistributionTimeout(FileDistributionError):
    """Waited too long for processors (to finish a file) or for a channel to appear."""


class SemaphoreFull(RedisPartsError):
    """No permit of the semaphore was free (and the caller did not wait)."""

    def __init__(self, name: str, limit: int, message: str | None = None) -> None:
        self.name, self.limit = name, limit
        super().__init__(
            message or f"semaphore {name!r} is full ({limit} holders); try again later"
        )


class SemaphoreTimeout(SemaphoreFull):
    """No permit of the semaphore freed up within the wait."""

    def __init__(self, name: str, limit: int, waited: float) -> None:
        self.waited = waited
        super().__init__(
            name,
            limit,
            f"semaphore {name!r} stayed full ({limit} holders) for {waited:.1f}s; "
            "wait longer or try again later",
        )


class SemaphoreLost(RedisPartsError):
    """A semaphore permit expired before its holder released it."""

    def __init__(self, name: str, holder_id: str, timeout: float) -> None:
        self.name, self.holder_id, self.timeout = name, holder_id, timeout
        super().__init__(
            f"permit {holder_id} of semaphore {name!r} expired before release (timeout "
            f"{timeout:g}s); another holder may have run at the same time: refresh it sooner "
            "or raise the timeout"
        )


class CompletionConflict(RedisPartsError):
    """The book method of autocomplete met a WATCH conflict on every attempt."""

    def __init__(self, guild: str, attempts: int) -> None:
        self.guild, self.attempts = guild, attempts
        super().__init__(
            f"guild {guild!r}: the index changed during each of {attempts} lookups; "
            "use the 'lex' method or retry later"
        )


class MarketError(RedisPartsError):
    """A marketplace operation was refused; nothing was changed."""


class InvalidPrice(MarketError, ValueError):
    """A price or an amount of funds is not a positive integer number of cents in range."""


class UnknownUser(MarketError, ValueError):
    """The marketplace has no user of that name."""

    def __init__(self, user: str) -> None:
        self.user = user
        super().__init__(f"unknown market user {user!r}; create it with create_user() first")


class UserExists(MarketError, ValueError):
    """create_user() was given the name of an existing user."""

    def __init__(self, user: str) -> None:
        self.user = user
        super().__init__(f"market user {user!r} already exists")


class ItemNotHeld(MarketError):
    """The seller does not hold the item (or it is already listed)."""

    def __init__(self, seller: str, item: str, reason: str = "is not in the inventory") -> None:
        self.seller, self.item = seller, item
        super().__init__(f"item {item!r} of {seller!r} {reason}")


class ItemListed(ItemNotHeld):
    """The user's item of that name is on the market: cancel the listing to get it back."""

    def __init__(self, seller: str, item: str) -> None:
        super().__init__(seller, item, "is already listed; cancel the listing first")


class ItemAlreadyHeld(MarketError):
    """The buyer already holds or lists an item of that name, and a user holds one per name."""

    def __init__(self, user: str, item: str) -> None:
        self.user, self.item = user, item
        super().__init__(
            f"{user!r} already holds or lists an item named {item!r}; "
            "sell or rename it before buying another"
        )


class ListingNotFound(MarketError):
    """The item is not (or no longer) listed by that seller."""

    def __init__(self, seller: str, item: str) -> None:
        self.seller, self.item = seller, item
        super().__init__(f"item {item!r} is not listed by {seller!r} (sold or withdrawn)")


class PriceChanged(MarketError):
    """The listed price differs from the price the buyer saw."""

    def __init__(self, item: str, expected: int, actual: int) -> None:
        self.item, self.expected, self.actual = item, expected, actual
        super().__init__(
            f"item {item!r} now costs {actual} cents, not {expected}; confirm the new price"
        )


class InsufficientFunds(MarketError):
    """The buyer's funds are below the price."""

    def __init__(self, buyer: str, funds: int, price: int) -> None:
        self.buyer, self.funds, self.price = buyer, funds, price
        super().__init__(f"{buyer!r} has {funds} cents, the item costs {price}")


class OwnItem(MarketError, ValueError):
    """A user tried to buy their own listing."""

    def __init__(self, user: str, item: str) -> None:
        self.user, self.item = user, item
        super().__init__(f"{user!r} cannot buy their own item {item!r}; cancel the listing")


class UnknownStrategy(MarketError, ValueError):
    """No purchase strategy of that name."""


class MarketBusy(MarketError):
    """Contention kept the operation from completing in time; retry later."""


class ReplicationTimeout(RedisPartsError):
    """A write did not reach the replica (or its disk) within the timeout."""

    def __init__(self, timeout: float, reason: str) -> None:
        self.timeout, self.reason = timeout, reason
        super().__init__(f"write not replicated within {timeout}s: {reason}")


class LogProgressConflict(RedisPartsError):
    """Another processor advanced the same log progress record; stop this one."""


class BackupError(RedisPartsError):
    """A snapshot could not be taken, found or copied."""


class InvalidTask(RedisPartsError, ValueError):
    """A task, its arguments or its options were refused before anything was written."""


class ScheduleNotFound(InvalidArgument, LookupError):
    """No periodic schedule is declared under this name (in the code this process loaded)."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        listed = ", ".join(known) if known else "none"
        super().__init__("schedule", name, f"no schedule of that name; declared: {listed}")


class SoftTimeLimitExceeded(RedisPartsError):
    """Raised inside a task that ran past its soft time limit; catch it to clean up."""

    def __init__(self) -> None:
        super().__init__("the task ran past its soft time limit")


class TaskNotReplicated(RedisPartsError):
    """An enqueued task reached the master but not enough replicas in time.

    It is stored and will run unless the master fails over first; enqueueing again
    with the same ``dedup_key`` is safe (no second task while the key lives).
    """

    def __init__(self, task_id: str, acknowledged: int, wanted: int, timeout: float) -> None:
        self.task_id, self.acknowledged, self.wanted = task_id, acknowledged, wanted
        super().__init__(
            f"task {task_id} acknowledged by {acknowledged} of {wanted} replica(s) within "
            f"{timeout}s; a failover now could lose it"
        )


class TaskNotFound(RedisPartsError, LookupError):
    """No task with this id exists (or it is not where the operation expects it)."""

    def __init__(self, task_id: str, where: str = "") -> None:
        self.task_id, self.where = task_id, where
        super().__init__(f"no task {task_id!r}{' ' + where if where else ''}")


class TaskFailed(RedisPartsError):
    """The task waited on raised on its last try; ``info`` holds its error and traceback."""

    def __init__(self, info: Any) -> None:
        self.info = info
        self.error_type, self.error_message = info.error_type, info.error_message
        self.traceback = info.traceback
        super().__init__(f"task {info.id} failed: {info.error_type}: {info.error_message}")


class TaskExpired(RedisPartsError):
    """The task waited on was not started before its ``expires`` time, and never ran."""

    def __init__(self, info: Any) -> None:
        self.info = info
        super().__init__(f"task {info.id} expired before a worker started it; it never ran")


class TaskCancelled(RedisPartsError):
    """The task waited on was cancelled: it never ran, or it was aborted while running."""

    def __init__(self, info: Any) -> None:
        self.info = info
        how = "aborted while running" if info.started_at is not None else "it never ran"
        super().__init__(f"task {info.id} was cancelled ({how})")


class TaskAborted(RedisPartsError):
    """Raised inside a running task whose cancellation's grace period ended (threads and
    solo pools); catch it only to clean up, then let it go on."""

    def __init__(self) -> None:
        super().__init__("the task was cancelled and its grace period ended")


class ResultTimeout(RedisPartsError, TimeoutError):
    """The task waited on had not ended within the timeout."""

    def __init__(self, task_id: str, timeout: float, state: str | None) -> None:
        self.task_id, self.timeout, self.state = task_id, timeout, state
        super().__init__(
            f"task {task_id} has not ended after {timeout:g}s (state {state or 'unknown'}); "
            "wait longer, or check that a worker listens on its queue"
        )


class LockTimeout(RedisPartsError):
    """A lock stayed held by others for the whole wait."""

    def __init__(self, name: str, timeout: float) -> None:
        self.name, self.timeout = name, timeout
        super().__init__(
            f"lock {name!r} still held by another owner after waiting {timeout:g}s; "
            "retry later or raise the timeout"
        )


class LockNotOwned(RedisPartsError):
    """The lock expired or belongs to another holder: this holder can no longer act on it."""

    def __init__(self, name: str, action: str) -> None:
        self.name, self.action = name, action
        super().__init__(
            f"cannot {action} lock {name!r}: it expired or another holder owns it now; "
            "work done under it since its TTL ran out was not protected"
        )
