from typing import Any

from django.core.management.base import CommandParser

from redisparts_app.connection import get_redis
from redisparts_app.management.base import RedisCommand
from redisparts_app.services.persistence import node_statuses


class Command(RedisCommand):
    help = (
        "Show the persistence settings, last save, AOF state and replication role and lag "
        "(of every node on a Redis Cluster)."
    )
    # The connectivity check would only repeat, as a warning, what this command reports.
    requires_system_checks = ()
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--connection",
            default=None,
            help="REDISPARTS connection alias (default: REDISPARTS['DEFAULT_CONNECTION'])",
        )

    def handle(self, *args: Any, connection: Any, as_json: Any, **options: Any) -> None:
        statuses = node_statuses(client=get_redis(connection))
        if as_json:
            single = len(statuses) == 1 and statuses[0]["node"] is None
            shown = {k: v for k, v in statuses[0].items() if k != "node"} if single else statuses
            self.report(shown, as_json=True)
            return
        for status in statuses:
            self._write(status)

    def _write(self, status: Any) -> None:
        node = status.pop("node")
        if node is not None:
            self.stdout.write(f"{'node':>24}: {node}")
        replicas = status.pop("replicas", None)
        for name, value in status.items():
            self.stdout.write(f"{name:>24}: {'-' if value is None else value}")
        for replica in replicas or []:
            self.stdout.write(
                f"{'replica':>24}: {replica['address']} {replica['state']}, "
                f"{replica['lag_bytes']} bytes and {replica['lag_seconds']}s behind"
            )
