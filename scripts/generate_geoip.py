"""Generate the small GeoLite2-format sample shipped for the demo and the tests.

    python scripts/generate_geoip.py [output-dir]   (default: redisparts_app/data/geoip/)

Writes ``GeoLite2-City-Blocks-IPv4.csv`` and ``GeoLite2-City-Locations-en.csv``
(the column layout of MaxMind's GeoLite2 City CSV files) beside this script.
The output is deterministic: a fixed seed picks a few hundred blocks with gaps
between them, each pointing at one of the cities below. The geoname ids and the
address ranges are invented; the data is for demonstrations, not for locating anyone.
"""

import csv
import ipaddress
import random
import sys
from pathlib import Path

SEED = 20260401
BLOCK_COUNT = 320
FIRST_ADDRESS = ipaddress.IPv4Address("11.0.0.0")

# city, subdivision code, subdivision name, country code, country name, continent, time zone
CITIES = [
    ("Paris", "IDF", "Île-de-France", "FR", "France", "EU", "Europe/Paris"),
    ("Lyon", "ARA", "Auvergne-Rhône-Alpes", "FR", "France", "EU", "Europe/Paris"),
    ("Marseille", "PAC", "Provence-Alpes-Côte d'Azur", "FR", "France", "EU", "Europe/Paris"),
    ("Berlin", "BE", "Land Berlin", "DE", "Germany", "EU", "Europe/Berlin"),
    ("München", "BY", "Bavaria", "DE", "Germany", "EU", "Europe/Berlin"),
    ("Hamburg", "HH", "Hamburg", "DE", "Germany", "EU", "Europe/Berlin"),
    ("Madrid", "MD", "Madrid", "ES", "Spain", "EU", "Europe/Madrid"),
    ("Barcelona", "CT", "Catalonia", "ES", "Spain", "EU", "Europe/Madrid"),
    ("London", "ENG", "England", "GB", "United Kingdom", "EU", "Europe/London"),
    ("Manchester", "ENG", "England", "GB", "United Kingdom", "EU", "Europe/London"),
    ("Edinburgh", "SCT", "Scotland", "GB", "United Kingdom", "EU", "Europe/London"),
    ("Roma", "62", "Lazio", "IT", "Italy", "EU", "Europe/Rome"),
    ("Milano", "25", "Lombardy", "IT", "Italy", "EU", "Europe/Rome"),
    ("Amsterdam", "NH", "North Holland", "NL", "Netherlands", "EU", "Europe/Amsterdam"),
    ("Warszawa", "14", "Mazovia", "PL", "Poland", "EU", "Europe/Warsaw"),
    ("New York", "NY", "New York", "US", "United States", "NA", "America/New_York"),
    ("San Francisco", "CA", "California", "US", "United States", "NA", "America/Los_Angeles"),
    ("Los Angeles", "CA", "California", "US", "United States", "NA", "America/Los_Angeles"),
    ("Chicago", "IL", "Illinois", "US", "United States", "NA", "America/Chicago"),
    ("Seattle", "WA", "Washington", "US", "United States", "NA", "America/Los_Angeles"),
    ("Austin", "TX", "Texas", "US", "United States", "NA", "America/Chicago"),
    ("Toronto", "ON", "Ontario", "CA", "Canada", "NA", "America/Toronto"),
    ("Montréal", "QC", "Quebec", "CA", "Canada", "NA", "America/Toronto"),
    ("Vancouver", "BC", "British Columbia", "CA", "Canada", "NA", "America/Vancouver"),
    ("Ciudad de México", "CMX", "Mexico City", "MX", "Mexico", "NA", "America/Mexico_City"),
    ("São Paulo", "SP", "São Paulo", "BR", "Brazil", "SA", "America/Sao_Paulo"),
    ("Rio de Janeiro", "RJ", "Rio de Janeiro", "BR", "Brazil", "SA", "America/Sao_Paulo"),
    (
        "Buenos Aires",
        "C",
        "Buenos Aires F.D.",
        "AR",
        "Argentina",
        "SA",
        "America/Argentina/Buenos_Aires",
    ),
    ("北京", "BJ", "Beijing", "CN", "China", "AS", "Asia/Shanghai"),
    ("上海", "SH", "Shanghai", "CN", "China", "AS", "Asia/Shanghai"),
    ("深圳", "GD", "Guangdong", "CN", "China", "AS", "Asia/Shanghai"),
    ("東京", "13", "Tokyo", "JP", "Japan", "AS", "Asia/Tokyo"),
    ("大阪", "27", "Osaka", "JP", "Japan", "AS", "Asia/Tokyo"),
    ("Seoul", "11", "Seoul", "KR", "South Korea", "AS", "Asia/Seoul"),
    ("Mumbai", "MH", "Maharashtra", "IN", "India", "AS", "Asia/Kolkata"),
    ("Bengaluru", "KA", "Karnataka", "IN", "India", "AS", "Asia/Kolkata"),
    ("Singapore", "", "", "SG", "Singapore", "AS", "Asia/Singapore"),
    ("Sydney", "NSW", "New South Wales", "AU", "Australia", "OC", "Australia/Sydney"),
    ("Melbourne", "VIC", "Victoria", "AU", "Australia", "OC", "Australia/Melbourne"),
    ("Auckland", "AUK", "Auckland", "NZ", "New Zealand", "OC", "Pacific/Auckland"),
    ("Lagos", "LA", "Lagos", "NG", "Nigeria", "AF", "Africa/Lagos"),
    ("Nairobi", "30", "Nairobi County", "KE", "Kenya", "AF", "Africa/Nairobi"),
    ("Cape Town", "WC", "Western Cape", "ZA", "South Africa", "AF", "Africa/Johannesburg"),
]
CONTINENTS = {
    "AF": "Africa", "AS": "Asia", "EU": "Europe", "NA": "North America",
    "OC": "Oceania", "SA": "South America",
}  # fmt: skip
FIRST_GEONAME_ID = 9100001

LOCATION_HEADER = [
    "geoname_id", "locale_code", "continent_code", "continent_name", "country_iso_code",
    "country_name", "subdivision_1_iso_code", "subdivision_1_name", "subdivision_2_iso_code",
    "subdivision_2_name", "city_name", "metro_code", "time_zone", "is_in_european_union",
]  # fmt: skip
BLOCK_HEADER = [
    "network", "geoname_id", "registered_country_geoname_id", "represented_country_geoname_id",
    "is_anonymous_proxy", "is_satellite_provider", "postal_code", "latitude", "longitude",
    "accuracy_radius",
]  # fmt: skip
EU_COUNTRIES = {"FR", "DE", "ES", "IT", "NL", "PL"}


def location_rows() -> list[list[str]]:
    rows = []
    for offset, (city, sub_code, sub_name, country, country_name, continent, zone) in enumerate(
        CITIES
    ):
        rows.append(
            [
                str(FIRST_GEONAME_ID + offset),
                "en",
                continent,
                CONTINENTS[continent],
                country,
                country_name,
                sub_code,
                sub_name,
                "",
                "",
                city,
                "",
                zone,
                "1" if country in EU_COUNTRIES else "0",
            ]
        )
    return rows


def block_rows(rng: random.Random) -> list[list[str]]:
    """Return BLOCK_COUNT aligned CIDR blocks in increasing order, most with a gap after."""
    rows = []
    address = int(FIRST_ADDRESS)
    for _ in range(BLOCK_COUNT):
        prefix = rng.choice([20, 21, 22, 22, 23, 24, 24, 24])
        size = 1 << (32 - prefix)
        address = (address + size - 1) // size * size  # align the start to the block size
        network = ipaddress.IPv4Network((address, prefix))
        geoname_id = str(FIRST_GEONAME_ID + rng.randrange(len(CITIES)))
        latitude = f"{rng.uniform(-60, 60):.4f}"
        longitude = f"{rng.uniform(-170, 170):.4f}"
        rows.append(
            [str(network), geoname_id, geoname_id, "", "0", "0", "", latitude, longitude, "100"]
        )
        # Two blocks in three are followed by a gap of unassigned addresses.
        gap = 0 if rng.random() < 1 / 3 else rng.choice([256, 1024, 4096, 65536])
        address += size + gap
    return rows


def write(directory: Path) -> None:
    rng = random.Random(SEED)  # noqa: S311  (reproducible sample data, not secrets)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "GeoLite2-City-Locations-en.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(LOCATION_HEADER)
        writer.writerows(location_rows())
    with open(directory / "GeoLite2-City-Blocks-IPv4.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(BLOCK_HEADER)
        writer.writerows(block_rows(rng))


if __name__ == "__main__":
    default = Path(__file__).resolve().parent.parent / "redisparts_app" / "data" / "geoip"
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
