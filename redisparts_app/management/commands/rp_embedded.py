from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.embedded import EmbeddedRedis
from redisparts_app.exceptions import RedisPartsError
from redisparts_app.management.base import RedisCommand


class Command(RedisCommand):
    help = "Start, stop or describe the embedded redis-server kept in the data folder."
    # The checks would report the stopped server this command is about to start.
    requires_system_checks = ()
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["start", "stop", "status"])
        parser.add_argument(
            "--data-dir",
            help="folder of the server's socket, AOF and log "
            "(default: REDISPARTS['EMBEDDED']['DATA_DIR'])",
        )

    def handle(self, *args: Any, action: Any, data_dir: Any, as_json: Any, **options: Any) -> None:
        try:
            server = EmbeddedRedis(data_dir) if data_dir else EmbeddedRedis.from_settings()
            if action == "start":
                started = server.start()
                verb = "Started" if started else "Already running:"
                text = f"{verb} redis-server at {server.url}"
                self.report({"started": started, "url": server.url}, as_json=as_json, text=text)
            elif action == "stop":
                stopped = server.stop()
                if as_json:
                    self.report({"stopped": stopped, "socket": str(server.socket)}, as_json=True)
                else:
                    self.stdout.write("Stopped." if stopped else "Not running.")
            else:
                self._status(server, as_json=as_json)
        except RedisPartsError as exc:  # the server could not be found, started or reached
            raise CommandError(str(exc), returncode=3) from exc

    def _status(self, server: EmbeddedRedis, *, as_json: bool) -> None:
        status = server.status()
        if as_json:
            self.report(status, as_json=True)
        else:
            for name, value in status.items():
                self.stdout.write(f"{name:>12}: {value}")
        if not status["running"]:
            raise CommandError(
                f"embedded redis-server is not running ({server.socket})", returncode=3
            )
