import redis
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError
from tqdm import tqdm

from marketplace.demo_data import ACCOUNTS, load, steps
from redisparts_app.connection import get_redis
from redisparts_app.exceptions import RedisPartsError


class Command(BaseCommand):
    help = (
        "Load the demo data: users with passwords, market accounts with funds, items and "
        "listings, two guilds, friendships, a group chat with history and some guild mail. "
        "Idempotent: only what is missing is created, so a second run changes nothing."
    )

    def handle(self, *args, verbosity: int, **options):
        try:
            get_redis().ping()
        except (redis.RedisError, RedisPartsError) as exc:
            raise CommandError(f"cannot reach Redis: {exc}", returncode=3) from exc
        bar = tqdm(total=len(steps()), desc="demo data", unit="step", disable=verbosity < 1)
        try:
            report = load(progress=lambda name: (bar.set_postfix_str(name), bar.update(1)))
        except KeyboardInterrupt:
            raise CommandError("interrupted; run it again to finish", returncode=130) from None
        except (redis.RedisError, RedisPartsError, DatabaseError) as exc:
            raise CommandError(f"loading the demo data failed: {exc}", returncode=1) from exc
        finally:
            bar.close()
        if verbosity >= 1:
            created = (
                f"{report.users} users, {report.market_accounts} market accounts, "
                f"{report.listings} listings, {report.guilds} guilds, "
                f"{report.friendships} friendships, {report.chats} chats, {report.mails} mails"
            )
            self.stdout.write(self.style.SUCCESS(f"Demo data loaded: created {created}."))
            if report.skipped and verbosity >= 2:
                self.stdout.write("Already there: " + ", ".join(report.skipped))
            logins = ", ".join(f"{a.username}/{a.password}" for a in ACCOUNTS)
            self.stdout.write(f"Demo logins: {logins}")
