from typing import Any

from django.core.management.base import CommandParser

from redisparts_app.management.base import RedisCommand
from redisparts_app.management.progress import progress_bar
from redisparts_app.services import registry
from redisparts_app.services.autocomplete import AddressBook


class Command(RedisCommand):
    help = (
        "Show how many names each component's registry holds, or rebuild the registries "
        "from the keyspace with one SCAN (--rebuild: after an upgrade, or for keys written "
        "by code outside the services; it also rebuilds each member's set of guilds)."
    )
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--rebuild", action="store_true", help="register every name found by a SCAN"
        )

    def handle(self, *args: Any, rebuild: bool, as_json: bool, verbosity: int, **opts: Any) -> None:
        client = self.connect()
        if rebuild:
            total = client.dbsize()
            with progress_bar(
                stream=self.stderr, total=total, unit="key", desc="scan", disable=verbosity < 1
            ) as bar:
                counts = registry.rebuild(client=client, progress=bar.update)
            for guild in registry.names("ac", client=client):
                AddressBook(guild, client=client).reindex()
        else:
            counts = {c: len(registry.names(c, client=client)) for c in registry.COMPONENTS}
        text = "\n".join(f"{component:>10}: {count}" for component, count in counts.items())
        self.report(counts, as_json=as_json, text=text if verbosity >= 1 else None)
