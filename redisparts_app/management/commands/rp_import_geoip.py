from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.exceptions import RedisPartsError, shorten
from redisparts_app.management.base import RedisCommand
from redisparts_app.management.progress import progress_bar
from redisparts_app.services import geoip


class Command(RedisCommand):
    help = (
        "Import GeoLite city blocks and locations CSV files for the IP-to-city lookup "
        "(the shipped sample with --sample)."
    )
    interrupted = "interrupted; the previous GeoIP data is unchanged"
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "blocks",
            nargs="?",
            help="GeoLite2-City-Blocks-IPv4.csv or legacy GeoLiteCity-Blocks.csv",
        )
        parser.add_argument(
            "locations",
            nargs="?",
            help="GeoLite2-City-Locations-en.csv or legacy GeoLiteCity-Location.csv",
        )
        parser.add_argument(
            "--sample", action="store_true", help="import the small sample shipped with the app"
        )
        parser.add_argument(
            "--encoding", default="utf-8", help="file encoding (legacy files: latin-1)"
        )
        parser.add_argument(
            "--batch-size", type=int, default=1000, help="rows per pipelined write (default 1000)"
        )

    def handle(
        self,
        *args: Any,
        blocks: Any,
        locations: Any,
        sample: Any,
        encoding: Any,
        batch_size: Any,
        verbosity: Any,
        as_json: Any,
        **options: Any,
    ) -> None:
        if sample == bool(blocks or locations):
            raise CommandError("give either --sample or both BLOCKS and LOCATIONS", returncode=2)
        if not sample and not (blocks and locations):
            raise CommandError("give both BLOCKS and LOCATIONS files", returncode=2)
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1", returncode=2)
        if sample:
            blocks, locations = geoip.SAMPLE_BLOCKS, geoip.SAMPLE_LOCATIONS
        try:
            total = _count_lines(blocks) + _count_lines(locations)
        except OSError as exc:
            shown = shorten(str(exc.filename), 200)
            raise CommandError(f"cannot read {shown}: {exc.strerror}", returncode=2) from exc
        except (ValueError, UnicodeError) as exc:  # a NUL or an unencodable character
            raise CommandError(f"cannot read the files given: {exc}", returncode=2) from exc
        client = self.connect()
        bar = progress_bar(
            total=total, unit="rows", desc="GeoIP import", stream=self.stderr, disable=verbosity < 1
        )
        try:
            report = geoip.import_geoip(
                blocks,
                locations,
                client=client,
                encoding=encoding,
                progress=bar.update,
                batch_size=batch_size,
            )
            bar.update(total - bar.n)  # header lines are not rows
        except (OSError, UnicodeDecodeError, RedisPartsError) as exc:
            raise CommandError(f"{exc}; the previous GeoIP data is unchanged") from exc
        finally:
            bar.close()

        for problem in report.problems:
            self.stderr.write(f"  bad row {problem}")
        if report.bad_rows > len(report.problems):
            self.stderr.write(f"  ... and {report.bad_rows - len(report.problems)} more")
        message = (
            f"Imported {report.blocks} blocks and {report.cities} cities; "
            f"{report.bad_rows} bad rows skipped."
        )
        if as_json:
            self.report(report, as_json=True)
        else:
            self.stdout.write(
                self.style.WARNING(message) if report.bad_rows else self.style.SUCCESS(message)
            )


def _count_lines(path: Any) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)
