"""What every rp_* command shares: exit codes, reaching Redis, ``--json`` output.

Exit codes: 0 done; 1 the work itself failed (a domain error, said in one line); 2 bad
input (an argument, a file, a setting); 3 Redis unreachable or failing; 130 interrupted
with Ctrl-C, saying what the interruption left (``interrupted``).
"""

import dataclasses
import json
from importlib import import_module
from typing import Any

import redis
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.module_loading import autodiscover_modules

from ..connection import Client, get_redis
from ..exceptions import ConnectionNotConfigured, InvalidArgument, RedisPartsError

__all__ = ["RedisCommand", "add_import_argument", "import_task_modules"]


class RedisCommand(BaseCommand):
    """A command that talks to Redis; subclasses write ``handle`` and nothing of the above."""

    # Said on Ctrl-C: what the interruption left behind.
    interrupted = "interrupted"
    # True for a command that reports: it takes --json and prints with ``report``.
    reports = False

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        if self.reports:
            parser.add_argument(
                "--json", action="store_true", dest="as_json", help="print the report as JSON"
            )
        return parser

    def execute(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute(*args, **options)
        except KeyboardInterrupt:
            raise CommandError(self.interrupted, returncode=130) from None
        except (InvalidArgument, ConnectionNotConfigured, ImproperlyConfigured) as exc:
            raise CommandError(str(exc), returncode=2) from exc
        except RedisPartsError as exc:
            raise CommandError(str(exc)) from exc
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise CommandError(f"cannot reach Redis: {exc}", returncode=3) from exc
        except redis.RedisError as exc:
            raise CommandError(f"Redis error: {exc}", returncode=3) from exc

    def connect(self, alias: str | None = None) -> Client:
        """The client of connection ``alias``, checked with PING, so no work starts in vain."""
        client = get_redis(alias)
        client.ping()
        return client

    def report(self, data: Any, *, as_json: bool, text: str | None = None) -> None:
        """Print ``data`` as JSON with --json, else ``text`` (a success line) if given.

        Dataclasses become objects; anything else JSON cannot hold becomes its ``str``.
        """
        if as_json:
            self.stdout.write(json.dumps(_plain(data), ensure_ascii=False, indent=2, default=str))
        elif text is not None:
            self.stdout.write(self.style.SUCCESS(text))


def add_import_argument(parser: CommandParser, what: str = "tasks") -> None:
    """``--import MODULE`` (repeatable), for the commands that need the registered tasks."""
    parser.add_argument(
        "--import",
        dest="modules",
        action="append",
        default=[],
        metavar="MODULE",
        help=f"import MODULE to register its {what} (repeatable); every installed app's "
        "tasks module is imported anyway",
    )


def import_task_modules(modules: list[str]) -> None:
    """Import ``modules`` and every installed app's ``tasks`` module (tasks, schedules)."""
    for module in modules:
        try:
            import_module(module)
        except ImportError as exc:
            raise CommandError(f"cannot import {module!r}: {exc}", returncode=2) from exc
    autodiscover_modules("tasks")


def _plain(data: Any) -> Any:
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return dataclasses.asdict(data)
    if isinstance(data, dict):
        return {key: _plain(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_plain(value) for value in data]
    return data
