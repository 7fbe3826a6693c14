from typing import Any

from redisparts_app.management.base import RedisCommand
from redisparts_app.services.locks import held_locks


class Command(RedisCommand):
    help = "List the distributed locks held right now: name, owner token, TTL left, fence."
    reports = True

    def handle(self, *args: Any, as_json: Any, **options: Any) -> None:
        found = held_locks(client=self.connect())
        if as_json:
            self.report(found, as_json=True)
            return
        if not found:
            self.stdout.write("No lock is held.")
            return
        self.stdout.write(self.style.MIGRATE_HEADING(f"{len(found)} lock(s) held"))
        for held in found:
            ttl = "no TTL" if held.ttl is None else f"{held.ttl:9.3f}s"
            fence = "-" if held.fence is None else str(held.fence)
            self.stdout.write(f"  {held.name}  owner {held.owner}  ttl {ttl}  fence {fence}")
