from typing import Any

from django.core.management.base import CommandParser

from redisparts_app.management.base import RedisCommand
from redisparts_app.services.config import (
    clear_maintenance,
    maintenance_status,
    set_maintenance,
)


class Command(RedisCommand):
    help = (
        "Turn the site's maintenance mode on or off, or show it: while on, visitors but staff "
        "see the maintenance page (the admin's switch on its Configuration page)."
    )
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["on", "off", "status"])
        parser.add_argument("--message", default="", help="on: the text shown to visitors")
        parser.add_argument(
            "--retry-after",
            type=int,
            help="on: seconds after which clients may retry (default: "
            "REDISPARTS['MAINTENANCE_RETRY_AFTER'])",
        )

    def handle(self, *args: Any, action: str, as_json: bool, **opts: Any) -> None:
        client = self.connect()
        if action != "on" and (opts["message"] or opts["retry_after"] is not None):
            self.stderr.write("--message and --retry-after go with on; ignored.")
        if action == "on":
            status = set_maintenance(
                retry_after=opts["retry_after"], message=opts["message"], client=client
            )
            text = f"Maintenance mode is on: visitors see the maintenance page{_said(status)}."
            self.report({"on": True, **status.__dict__}, as_json=as_json, text=text)
        elif action == "off":
            was_on = clear_maintenance(client=client)
            text = "Maintenance mode is off." if was_on else "Maintenance mode was already off."
            self.report({"on": False, "was_on": was_on}, as_json=as_json, text=text)
        else:
            found = maintenance_status(client=client)
            if found is None:
                self.report({"on": False}, as_json=as_json, text="Maintenance mode is off.")
            else:
                text = f"Maintenance mode is on{_said(found)} (retry after {found.retry_after}s)."
                self.report({"on": True, **found.__dict__}, as_json=as_json, text=text)


def _said(status: Any) -> str:
    return f", saying {status.message!r}" if status.message else ""
