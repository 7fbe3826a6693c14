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


class InvalidIPAddress(RedisPartsError, ValueError):
    """A string given to the IP-to-city lookup is not a dotted-quad IPv4 address."""

    def __init__(self, value: object, reason: str) -> None:
        self.value, self.reason = value, reason
        super().__init__(f"invalid IPv4 address {value!r}: {reason}")


class GeoIPImportError(RedisPartsError):
    """A GeoIP import could not run (unknown CSV layout, no usable row); old data stays."""


class InvalidConfig(RedisPartsError, ValueError):
    """A configuration value was refused before it was stored (not a JSON dict, too big...)."""


class ComponentConnectionError(RedisPartsError):
    """The stored ``redis`` configuration of a component cannot build a client."""
