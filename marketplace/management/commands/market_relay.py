"""``manage.py market_relay``: move recorded sales from the market's outbox into the e-mail queue.

The web request relays its own sale right after the purchase; this loop relays whatever
that missed (a web process that died after the purchase, Redis unreachable for a moment).
``manage.py demo`` does the same in its own (runner) process, beside the worker and the
scheduler.
"""

import logging
import signal
import threading

import redis
from django.core.management.base import BaseCommand, CommandError

from marketplace.tasks import relay_sold_emails
from redisparts_app.exceptions import RedisPartsError

logger = logging.getLogger("marketplace")

MAX_BACKOFF = 30.0


class Command(BaseCommand):
    help = (
        "Relay sales recorded by purchases into the sold e-mail queue every --interval "
        "seconds until SIGTERM or Ctrl-C."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--interval",
            type=float,
            default=1.0,
            help="seconds between passes when the outbox is empty (default 1)",
        )
        parser.add_argument(
            "--batch", type=int, default=100, help="sales relayed per pass (default 100)"
        )
        parser.add_argument(
            "--once", action="store_true", help="relay until the outbox is empty, then exit"
        )

    def handle(self, *args, interval, batch, once, verbosity, **options):
        if not 0 < interval <= 3600:
            raise CommandError(f"--interval must be in (0, 3600], got {interval}", returncode=2)
        if not 1 <= batch <= 1000:
            raise CommandError(f"--batch must be from 1 to 1000, got {batch}", returncode=2)
        stop = threading.Event()
        previous = {
            sig: signal.signal(sig, lambda signum, frame: stop.set())
            for sig in (signal.SIGTERM, signal.SIGINT)
        }
        relayed, backoff = 0, 0.0
        try:
            while not stop.is_set():
                try:
                    count = relay_sold_emails(batch)
                except (redis.ConnectionError, redis.TimeoutError) as exc:
                    if once:
                        raise CommandError(f"cannot reach Redis: {exc}", returncode=3) from exc
                    backoff = min(MAX_BACKOFF, backoff * 2 or 0.5)
                    logger.warning("Redis unreachable (%s); relaying again in %.1fs", exc, backoff)
                    stop.wait(backoff)
                    continue
                except (redis.RedisError, RedisPartsError, ValueError) as exc:
                    if once:
                        raise CommandError(f"relaying failed: {exc}") from exc
                    logger.error("relaying sold e-mails failed: %s", exc, exc_info=True)
                    stop.wait(interval)
                    continue
                backoff = 0.0
                relayed += count
                if count < batch:
                    if once:
                        break
                    stop.wait(interval)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if verbosity >= 1:
            self.stdout.write(self.style.SUCCESS(f"Relayed {relayed} sale(s)."))
