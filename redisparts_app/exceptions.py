"""Errors raised on purpose by redisparts_app."""


class RedisPartsError(Exception):
    """Base class for errors raised on purpose by redisparts_app."""


class InvalidKeyPart(RedisPartsError, ValueError):
    """A user-supplied part of a key name was refused before reaching Redis."""

    def __init__(self, kind: str, value: object, reason: str) -> None:
        self.kind, self.value, self.reason = kind, value, reason
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        super().__init__(f"invalid {kind} {shown}: {reason}")


class ConnectionNotConfigured(RedisPartsError):
    """A connection alias is missing from REDISPARTS["CONNECTIONS"] or malformed."""


class ServerBinaryNotFound(RedisPartsError):
    """No redis-server executable could be found for an embedded or test server."""


class EmbeddedServerError(RedisPartsError):
    """The embedded redis-server could not be started, reached or stopped."""
