import dataclasses
import json
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError, CommandParser

from redisparts_app.connection import get_redis
from redisparts_app.services.locks import held_locks


class Command(BaseCommand):
    help = "List the distributed locks held right now: name, owner token, TTL left, fence."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="print JSON instead of a table"
        )

    def handle(self, *args: Any, as_json: Any, **options: Any) -> None:
        try:
            client = get_redis()
            client.ping()
            found = held_locks(client=client)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise CommandError(f"cannot reach Redis: {exc}", returncode=3) from exc

        if as_json:
            rows = [dataclasses.asdict(held) for held in found]
            self.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2))
            return
        if not found:
            self.stdout.write("No lock is held.")
            return
        self.stdout.write(self.style.MIGRATE_HEADING(f"{len(found)} lock(s) held"))
        for held in found:
            ttl = "no TTL" if held.ttl is None else f"{held.ttl:9.3f}s"
            fence = "-" if held.fence is None else str(held.fence)
            self.stdout.write(f"  {held.name}  owner {held.owner}  ttl {ttl}  fence {fence}")
