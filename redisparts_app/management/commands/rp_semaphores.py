from typing import Any

from django.core.management.base import CommandParser

from redisparts_app.management.base import RedisCommand
from redisparts_app.services import semaphores


class Command(RedisCommand):
    help = "List counting semaphores and their live holders (id, age, expiry, ticket, reason)."
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "names", nargs="*", metavar="NAME", help="semaphores to show (default: all in use)"
        )

    def handle(self, *args: Any, names: Any, as_json: Any, **options: Any) -> None:
        client = self.connect()
        names = names or semaphores.semaphore_names(client=client)
        found = {name: semaphores.holders(name, client=client) for name in names}
        if as_json:
            self.report(found, as_json=True)
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
