"""The demo's log aggregation: visits per country per day, with the IP-to-city lookup.

Run it as the per-line callback of a file processor::

    manage.py rp_process_logs --channel logs --id 0 --aggregate marketplace.visits.CountryVisits
"""

import re
from collections import Counter, defaultdict
from collections.abc import Callable

from redis import Redis

from redisparts_app.connection import get_redis
from redisparts_app.exceptions import InvalidMessage
from redisparts_app.keys import make_key
from redisparts_app.services import geoip


class CountryVisits:
    """Visits per country per day from log lines ``<IPv4 address> <YYYY-MM-DD> ...``.

    Use the instance as the line callback and ``flush`` as the per-file flush:
    counts stay in the process until ``flush`` adds them to Redis in one
    pipeline, so a file that fails its checksum adds nothing. ``locate`` maps
    an address to a country code or None (counted as ``"--"``); the default
    is the IP-to-city lookup. Lines that do not parse are counted in ``skipped``.
    Keys: ``rp:visits:{<day>}:countries`` zset country -> visits.
    """

    UNKNOWN = "--"
    _DAY = re.compile(r"\d{4}-\d{2}-\d{2}")

    def __init__(
        self, locate: Callable[[str], str | None] | None = None, *, client: Redis | None = None
    ) -> None:
        self.locate = locate if locate is not None else locate_country
        self.client = client if client is not None else get_redis()
        self.pending: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.skipped = 0

    def __call__(self, line: bytes) -> None:
        fields = line.split(None, 2)
        try:
            ip, day = fields[0].decode("ascii"), fields[1].decode("ascii")
        except (IndexError, UnicodeDecodeError):
            self.skipped += 1
            return
        if not self._DAY.fullmatch(day):
            self.skipped += 1
            return
        try:
            country = self.locate(ip) or self.UNKNOWN
        except ValueError:
            self.skipped += 1
            return
        self.pending[day][country] += 1

    def flush(self, name: str | None = None) -> None:
        """Add the counts gathered since the last flush to Redis."""
        if not self.pending:
            return
        pipe = self.client.pipeline(transaction=False)
        for day, countries in self.pending.items():
            for country, visits in countries.items():
                pipe.zincrby(self.key(day), visits, country)
        pipe.execute()
        self.pending.clear()

    def discard(self) -> None:
        """Forget the counts gathered since the last flush."""
        self.pending.clear()

    def counts(self, day: str) -> dict[str, int]:
        """Return the visits per country stored for ``day``."""
        return {
            country.decode(): int(visits)
            for country, visits in self.client.zrange(self.key(day), 0, -1, withscores=True)
        }

    @classmethod
    def key(cls, day: str) -> str:
        if not isinstance(day, str) or not cls._DAY.fullmatch(day):
            raise InvalidMessage("day", f"must be YYYY-MM-DD, got {day!r}")
        return make_key("visits", day, "countries")


def locate_country(ip: str) -> str | None:
    """Return the country code of ``ip`` from the IP-to-city lookup, or None."""
    city = geoip.find_city(ip)
    return city.country if city is not None else None
