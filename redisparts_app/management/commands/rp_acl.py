import re
from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app import acl
from redisparts_app.checks import check_settings
from redisparts_app.conf import app_settings
from redisparts_app.management.base import RedisCommand

# An ACL user name is one word: no spaces, control characters or rule syntax.
_USER_RE = re.compile(r"^[A-Za-z0-9_.@\-]{1,100}$")
_VERSION_RE = re.compile(r"^(\d{1,3})\.(\d{1,3})(?:\.\d{1,3})?$")


class Command(RedisCommand):
    help = (
        "Print the least-privilege Redis ACL rules of the app (or of some components) as an "
        "ACL SETUSER line to paste; the password is set apart, once."
    )
    # Printing rules needs no server: no check pings one; the key prefix is checked below.
    requires_system_checks = ()
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--component",
            action="append",
            dest="components",
            metavar="NAME",
            help=f"only this component and what it uses; repeatable "
            f"(one of {', '.join(acl.component_names())}; default: all)",
        )
        parser.add_argument("--user", default="redisparts", help="the ACL user (redisparts)")
        parser.add_argument(
            "--server-version",
            default=".".join(map(str, acl.NEWEST)),
            help="the server's Redis version, e.g. 7.0; rules for commands it lacks are "
            "left out (default %(default)s: Redis 7.2 and newer, Valkey)",
        )
        parser.add_argument(
            "--rules-only",
            action="store_true",
            help="print only the rules, e.g. for a managed service's access string",
        )

    def handle(
        self, *args: Any, components: list[str] | None, user: str, as_json: bool, **opts: Any
    ) -> None:
        unknown = sorted(set(components or ()) - set(acl.component_names()))
        if unknown:
            raise CommandError(
                f"unknown component {', '.join(map(repr, unknown))}; "
                f"the components are: {', '.join(acl.component_names())}",
                returncode=2,
            )
        if not _USER_RE.match(user):
            raise CommandError(
                f"--user {user[:100]!r} is not a plain name (letters, digits, _ . @ -)",
                returncode=2,
            )
        match = _VERSION_RE.match(opts["server_version"])
        if not match:
            raise CommandError(
                f"--server-version {opts['server_version'][:100]!r} is not a version such as 7.2",
                returncode=2,
            )
        version = (int(match[1]), int(match[2]))
        for error in check_settings():
            if error.id == "redisparts.E002":  # the prefix goes into the key patterns
                raise CommandError(f"{error.msg} {error.hint}", returncode=2)
        prefix = app_settings.KEY_PREFIX
        rules = acl.rules(prefix, components, version)
        line = acl.setuser_line(user, prefix, components, version)
        if as_json:
            chosen = components or acl.component_names()
            data = {"user": user, "components": chosen, "rules": rules, "line": line}
            self.report(data, as_json=True)
        else:  # plain, never coloured: the line is pasted or piped to redis-cli
            self.stdout.write(" ".join(rules) if opts["rules_only"] else line)
