from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from bench import market_load

STRATEGIES = market_load.STRATEGIES  # the service's strategies, then their peers


class Command(BaseCommand):
    help = (
        'Print the "heavily loaded marketplace" table: listers/buyers 1/1, 5/1 and 5/5 '
        "processes for each purchase strategy and its peers (the book's lock purchases, a "
        "bare one-script purchase), with the invariant checks. Runs on a "
        "redis-server of its own (started and stopped here), never on the configured one."
    )

    def add_arguments(self, parser):
        parser.add_argument("--seconds", type=float, default=2.0, help="length of each run")
        parser.add_argument(
            "--repetitions", type=int, default=3, help="runs per row (medians are shown)"
        )
        parser.add_argument(
            "--strategy", action="append", choices=STRATEGIES, dest="strategies",
            help="a strategy to measure (repeat for several; default: all)",
        )  # fmt: skip

    def handle(self, *args, seconds, repetitions, strategies, **options):
        if not 0 < seconds <= 600:
            raise CommandError("--seconds must be above 0 and at most 600", returncode=2)
        if not 1 <= repetitions <= 100:
            raise CommandError("--repetitions must be from 1 to 100", returncode=2)
        strategies = tuple(strategies or STRATEGIES)
        runs = len(strategies) * len(market_load.CONFIGURATIONS) * repetitions
        bar = tqdm(total=runs, desc="market runs", unit="run", file=self.stderr)
        try:
            rows = market_load.run_table(
                seconds, repetitions, strategies, progress=lambda _row: bar.update()
            )
        except KeyboardInterrupt:
            raise CommandError("interrupted", returncode=130) from None
        except RuntimeError as exc:  # no redis-server binary, or it would not start
            raise CommandError(str(exc), returncode=3) from exc
        finally:
            bar.close()
        table = [market_load.COLUMNS, *market_load.table_rows(rows)]
        widths = [max(len(str(line[i])) for line in table) for i in range(len(table[0]))]
        for line in table:
            self.stdout.write("  ".join(str(v).rjust(w) for v, w in zip(line, widths, strict=True)))
        for line in market_load.target_lines(rows):
            self.stdout.write(line)
        if not all(row.holds for row in rows):
            raise CommandError("an invariant was broken (see the last column)", returncode=1)
