import dataclasses
import json
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError, CommandParser

from redisparts_app.connection import get_redis
from redisparts_app.exceptions import InvalidKeyPart
from redisparts_app.services import semaphores


class Command(BaseCommand):
    help = "List counting semaphores and their live holders (id, age, expiry, ticket, reason)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "names", nargs="*", metavar="NAME", help="semaphores to show (default: all in use)"
        )
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="print JSON instead of a table"
        )

    def handle(self, *args: Any, names: Any, as_json: Any, **options: Any) -> None:
        try:
            client = get_redis()
            client.ping()
            if not names:
                names = semaphores.semaphore_names(client=client)
            found = {name: semaphores.holders(name, client=client) for name in names}
        except InvalidKeyPart as exc:
            raise CommandError(str(exc), returncode=2) from exc
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise CommandError(f"cannot reach Redis: {exc}", returncode=3) from exc

        if as_json:
            self.stdout.write(_dumps(found))
            return
        if not found:
            self.stdout.write("No semaphore has holders.")
        for name, holders in found.items():
            self.stdout.write(self.style.MIGRATE_HEADING(f"{name}: {len(holders)} holder(s)"))
            for holder in holders:
                ticket = "-" if holder.ticket is None else str(holder.ticket)
                self.stdout.write(
                    f"  {holder.id}  age {holder.age:8.1f}s  expires in {holder.expires_in:7.1f}s"
                    f"  ticket {ticket:>6}  {holder.reason}"
                )


def _dumps(found: dict[str, list[semaphores.Holder]]) -> str:
    data = {name: [dataclasses.asdict(h) for h in holders] for name, holders in found.items()}
    return json.dumps(data, ensure_ascii=False, indent=2)
