"""IP-to-city lookup: import GeoLite CSV files into Redis, find the city of an IPv4 address.

Import: ``from redisparts_app.services.geoip import find_city, import_geoip``.

Keys (one hash tag, so the swap at the end of an import is one MULTI on a Cluster too):

- ``rp:geoip:{geoip}:blocks`` sorted set; one member per address block,
  ``<geoname_id>:<last address>:<row>`` scored by the block's first address (an integer).
- ``rp:geoip:{geoip}:cities`` hash; geoname_id → JSON
  ``{"city", "region", "country", "country_name", "continent"}``.
- ``rp:geoip:{geoip}:import:<id>:blocks`` / ``:cities`` while an import runs (one-hour TTL).

Accepted files: GeoLite2 City blocks and locations, and the legacy ``GeoLiteCity-*.csv``
(``encoding="latin-1"``), recognised from the header row. Guarantee: an import renames its
temporary keys into place in one MULTI, so a lookup sees the old data or the new, never half;
a failed import leaves the old data untouched; bad rows are counted (``ImportReport``), not
fatal. A lookup is one Lua script and checks the block's last address, so an address in a gap
gives ``None``. Async twins: ``afind_city``, ``acounts``; ``import_geoip`` stays sync.
"""

import csv
import ipaddress
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .. import faces
from ..connection import Client, on_slot, resolve_client
from ..exceptions import GeoIPImportError, InvalidArgument, InvalidArgumentType
from ..keys import make_key
from ..validation import check_count

if TYPE_CHECKING:
    from _csv import _reader

__all__ = [
    "City",
    "ImportReport",
    "acounts",
    "afind_city",
    "counts",
    "find_city",
    "import_geoip",
    "ip_to_score",
]

COMPONENT = "geoip"
TAG = "geoip"
# Seconds an abandoned import's temporary keys survive.
IMPORT_TTL = 3600
# Problems quoted in an ImportReport; the count covers all of them.
MAX_PROBLEMS = 20

SAMPLE_DIR = Path(str(files("redisparts_app") / "data" / "geoip"))
SAMPLE_BLOCKS = SAMPLE_DIR / "GeoLite2-City-Blocks-IPv4.csv"
SAMPLE_LOCATIONS = SAMPLE_DIR / "GeoLite2-City-Locations-en.csv"

Progress = Callable[[int], None]


@dataclass(frozen=True)
class City:
    """Where an address is: ``country`` is the ISO 3166 code ("FR"), ``city_id`` the geoname id."""

    city_id: str
    city: str
    region: str
    country: str
    country_name: str = ""
    continent: str = ""


@dataclass
class ImportReport:
    """What an import stored, and the rows it refused (``problems`` quotes the first few)."""

    blocks: int = 0
    cities: int = 0
    bad_rows: int = 0
    problems: list[str] = field(default_factory=list)

    def refuse(self, path: Path, line: int, reason: str) -> None:
        self.bad_rows += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"{path.name}:{line}: {reason}")


def _blocks_key() -> str:
    return make_key(COMPONENT, TAG, "blocks")


def _cities_key() -> str:
    return make_key(COMPONENT, TAG, "cities")


def ip_to_score(ip: str) -> int:
    """Return a dotted-quad IPv4 address as an integer; raise InvalidArgument if malformed."""
    if not isinstance(ip, str):
        raise InvalidArgumentType("IPv4 address", ip, f"must be a string, got {type(ip).__name__}")
    try:
        return int(ipaddress.IPv4Address(ip.strip()))
    except ipaddress.AddressValueError as exc:
        raise InvalidArgument("IPv4 address", ip, f"{exc}; give a dotted quad") from None


def find_city(ip: str, *, client: Client | None = None) -> City | None:
    """Return the City of ``ip``, or None when no imported block holds it.

    Raise InvalidArgument (a ValueError) for anything but a dotted-quad IPv4
    address. A block whose city is missing from the locations file gives None.
    """
    return faces.run(_find_city(ip), resolve_client(client))


async def afind_city(ip: str, *, client: Client | None = None) -> City | None:
    """The async twin of ``find_city`` (``client``: a redis.asyncio client or None)."""
    return await faces.arun(_find_city(ip), client)


def _find_city(ip: str) -> faces.Op:
    score = ip_to_score(ip)

    def city(found: list[bytes]) -> City | None:
        if not found:
            return None
        member, city_json = found
        geoname_id, last, _row = member.decode().split(":")
        if score > int(last) or not city_json:
            return None
        return City(city_id=geoname_id, **json.loads(city_json))

    return faces.script("geoip_find", [_blocks_key(), _cities_key()], [score], then=city)


def counts(*, client: Client | None = None) -> tuple[int, int]:
    """Return the number of address blocks and of cities imported (0, 0 before any import)."""
    return faces.run(_counts(), resolve_client(client))


async def acounts(*, client: Client | None = None) -> tuple[int, int]:
    """The async twin of ``counts``."""
    return await faces.arun(_counts(), client)


def _counts() -> faces.Op:
    return faces.pipeline(
        [faces.command("zcard", _blocks_key()), faces.command("hlen", _cities_key())],
        then=lambda replies: (int(replies[0]), int(replies[1])),
    )


def import_geoip(
    blocks_path: str | Path,
    locations_path: str | Path,
    *,
    client: Client | None = None,
    encoding: str = "utf-8",
    progress: Progress | None = None,
    batch_size: int = 1000,
) -> ImportReport:
    """Replace the stored blocks and cities with those of two CSV files; return a report.

    ``progress`` is called with the number of rows read since its last call
    (for a progress bar over both files). Raise FileNotFoundError for a missing
    file and GeoIPImportError for an unknown layout or when no block or no city
    could be read; in every failure the previous data stays in place.
    """
    check_count(batch_size, "batch_size")
    blocks_path, locations_path = Path(blocks_path), Path(locations_path)
    for path in (blocks_path, locations_path):
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
    client = resolve_client(client)
    import_id = uuid.uuid4().hex
    tmp_blocks = make_key(COMPONENT, TAG, "import", import_id, "blocks")
    tmp_cities = make_key(COMPONENT, TAG, "import", import_id, "cities")
    report = ImportReport()
    try:
        with open(locations_path, newline="", encoding=encoding) as f:
            cities = _read_locations(f, locations_path, report)
            report.cities = _store(client, tmp_cities, cities, batch_size, progress, _hset)
        with open(blocks_path, newline="", encoding=encoding) as f:
            blocks = _read_blocks(f, blocks_path, report)
            report.blocks = _store(client, tmp_blocks, blocks, batch_size, progress, _zadd)
        if not report.blocks or not report.cities:
            raise GeoIPImportError(
                f"nothing imported: {report.blocks} blocks, {report.cities} cities read "
                f"({report.bad_rows} bad rows); the previous data is unchanged"
            )
        with on_slot(client, _blocks_key()) as server:
            pipe = server.pipeline(transaction=True)
            pipe.rename(tmp_blocks, _blocks_key())
            pipe.rename(tmp_cities, _cities_key())
            pipe.persist(_blocks_key())
            pipe.persist(_cities_key())
            pipe.execute()
    except BaseException:
        # Ctrl-C included: the temporary keys go, the published ones were never touched.
        client.delete(tmp_blocks, tmp_cities)
        raise
    return report


def _store(
    client: Client,
    key: str,
    items: Iterator[Any],
    batch_size: int,
    progress: Callable[[int], object] | None,
    write: Callable[[Client, str, list[Any]], None],
) -> int:
    """Write ``items`` to ``key`` in pipelined batches; return how many were stored.

    ``items`` yields ``(rows_read, entry)``, entry None for a refused row, so the
    progress bar also advances over bad rows.
    """
    stored = 0
    batch: list[Any] = []
    rows = 0

    def flush() -> None:
        nonlocal rows
        if batch:
            pipe = client.pipeline(transaction=False)
            write(pipe, key, batch)
            pipe.expire(key, IMPORT_TTL)
            pipe.execute()
            batch.clear()
        if progress is not None and rows:
            progress(rows)
        rows = 0

    for read, entry in items:
        rows += read
        if entry is not None:
            batch.append(entry)
            stored += 1
        if len(batch) >= batch_size or rows >= batch_size:
            flush()
    flush()
    return stored


def _hset(pipe: Client, key: str, batch: list[tuple[str, str]]) -> None:
    pipe.hset(key, mapping=dict(batch))


def _zadd(pipe: Client, key: str, batch: list[tuple[str, int]]) -> None:
    pipe.zadd(key, dict(batch))


def _header(reader: "_reader", path: Path, layouts: dict[str, str]) -> str:
    """Skip to the header row (legacy files open with a copyright line); return its layout."""
    for row in reader:
        if row and row[0].strip() in layouts:
            return layouts[row[0].strip()]
        if reader.line_num >= 3:
            break
    expected = " or ".join(repr(column) for column in layouts)
    raise GeoIPImportError(f"{path}: no header row starting with {expected} in the first lines")


def _read_locations(f: IO[str], path: Path, report: ImportReport) -> Iterator[tuple]:
    reader = csv.reader(f)
    layout = _header(reader, path, {"geoname_id": "geolite2", "locId": "legacy"})
    for row in reader:
        if not row:
            yield 1, None
            continue
        try:
            if layout == "geolite2":
                geoname_id, city = row[0], {
                    "city": row[10], "region": row[7], "country": row[4],
                    "country_name": row[5], "continent": row[2],
                }  # fmt: skip
            else:
                geoname_id, city = row[0], {
                    "city": row[3], "region": row[2], "country": row[1],
                    "country_name": "", "continent": "",
                }  # fmt: skip
        except IndexError:
            report.refuse(path, reader.line_num, f"expected more columns, got {len(row)}")
            yield 1, None
            continue
        geoname_id = geoname_id.strip()
        if not geoname_id.isascii() or not geoname_id.isdigit():
            report.refuse(path, reader.line_num, f"location id {geoname_id!r} is not a number")
            yield 1, None
            continue
        yield 1, (geoname_id, json.dumps(city, ensure_ascii=False))


def _read_blocks(f: IO[str], path: Path, report: ImportReport) -> Iterator[tuple]:
    reader = csv.reader(f)
    layout = _header(reader, path, {"network": "geolite2", "startIpNum": "legacy"})
    for index, row in enumerate(reader):
        if not row:
            yield 1, None
            continue
        try:
            first, last, geoname_id = _parse_block(row, layout)
        except (ValueError, IndexError) as exc:
            report.refuse(path, reader.line_num, str(exc) or "malformed row")
            yield 1, None
            continue
        yield 1, (f"{geoname_id}:{last}:{index}", first)


def _parse_block(row: list[str], layout: str) -> tuple[int, int, str]:
    """Return (first address, last address, geoname_id); raise ValueError for a bad row."""
    if layout == "geolite2":
        if len(row) < 3:
            raise ValueError(f"expected at least 3 columns, got {len(row)}")
        try:
            network = ipaddress.IPv4Network(row[0].strip())
        except ValueError as exc:
            raise ValueError(f"bad network {row[0]!r}: {exc}") from None
        first, last = int(network.network_address), int(network.broadcast_address)
        # Some blocks only know the country the range is registered to.
        geoname_id = row[1].strip() or row[2].strip()
    else:
        if len(row) < 3:
            raise ValueError(f"expected 3 columns, got {len(row)}")
        first, last = _legacy_address(row[0]), _legacy_address(row[1])
        if last < first:
            raise ValueError(f"block ends ({row[1]}) before it starts ({row[0]})")
        geoname_id = row[2].strip()
    if not geoname_id.isascii() or not geoname_id.isdigit():
        raise ValueError(f"location id {geoname_id!r} is not a number")
    return first, last, geoname_id


def _legacy_address(value: str) -> int:
    value = value.strip()
    if value.isascii() and value.isdigit():
        number = int(value)
        if number >= 2**32:
            raise ValueError(f"address {value} is beyond 255.255.255.255")
        return number
    try:
        return int(ipaddress.IPv4Address(value))
    except ValueError:
        raise ValueError(f"bad address {value!r}") from None
