import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.management.base import RedisCommand
from redisparts_app.services import config, listings

PAGE = 200  # configurations read per call when listing them all


class Command(RedisCommand):
    help = (
        "Get, set, delete or list the JSON configurations of the components (the admin's "
        "Configuration page); set takes a JSON object, or - to read it from stdin."
    )
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["get", "set", "delete", "list"])
        parser.add_argument("kind", nargs="?", help="configuration type, e.g. redis or logs")
        parser.add_argument("name", nargs="?", help="component name")
        parser.add_argument("value", nargs="?", help="set: a JSON object, or - for stdin")

    def handle(
        self,
        *args: Any,
        action: str,
        kind: str | None,
        name: str | None,
        value: str | None,
        as_json: bool,
        **opts: Any,
    ) -> None:
        if action == "list":
            if name is not None:
                raise CommandError("list takes at most a configuration type", returncode=2)
            self._list(kind, as_json)
            return
        if kind is None or name is None:
            raise CommandError(f"{action} needs a configuration type and a name", returncode=2)
        if (value is not None) != (action == "set"):
            raise CommandError("set, and only set, takes a JSON value", returncode=2)
        config.config_key(kind, name)  # a bad type or name: exit 2 before Redis is reached
        if action == "set":
            parsed = config.parse_config(sys.stdin.read() if value == "-" else str(value))
            client = self.connect()
            config.set_config(kind, name, parsed, client=client)
            shown = {"kind": kind, "name": name, "value": parsed}
            self.report(shown, as_json=as_json, text=f"Configuration {kind}/{name} saved.")
            return
        client = self.connect()
        if action == "get":
            # JSON either way: it is what set takes back.
            self.report(config.get_config(kind, name, wait=0, client=client), as_json=True)
            return
        deleted = config.delete_config(kind, name, client=client)
        self.report(
            {"kind": kind, "name": name, "deleted": deleted},
            as_json=as_json,
            text=f"Configuration {kind}/{name} deleted." if deleted else None,
        )
        if not deleted:
            raise CommandError(f"there is no configuration {kind}/{name}", returncode=1)

    def _list(self, kind: str | None, as_json: bool) -> None:
        client = self.connect()
        pairs, cursor = [], 0
        while True:
            page = listings.config_page(cursor, PAGE, client=client)
            pairs += [(k, n) for k, n in page.items if kind is None or k == kind]
            if not page.cursor:
                break
            cursor = page.cursor
        pairs.sort()
        if as_json:
            self.report([{"kind": k, "name": n} for k, n in pairs], as_json=True)
        else:
            self.stdout.write("\n".join(f"{k}/{n}" for k, n in pairs) or "No configuration.")
