from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from redisparts_app.management.base import RedisCommand
from redisparts_app.management.progress import progress_bar
from redisparts_app.services.autocomplete import (
    METHODS,
    AddressBook,
    validate_limit,
    validate_name,
    validate_prefix,
)

BATCH = 500


class Command(RedisCommand):
    help = "Load a guild's member names from a file, complete a prefix, or purge stale sentinels."
    reports = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("guild", help="guild whose address book to use")
        parser.add_argument(
            "--load", metavar="FILE", help="UTF-8 file with one member name per line to join"
        )
        parser.add_argument("--query", metavar="PREFIX", help="print the names completing PREFIX")
        parser.add_argument(
            "--limit",
            type=int,
            default=None,
            help="names printed by --query (default: the AUTOCOMPLETE_LIMIT setting, 10)",
        )
        parser.add_argument(
            "--method", choices=METHODS, default=None, help="completion method (default: setting)"
        )
        parser.add_argument(
            "--purge-sentinels",
            type=float,
            metavar="SECONDS",
            default=None,
            help="delete book-method sentinels older than SECONDS left by killed clients",
        )

    def handle(
        self,
        *args: Any,
        guild: Any,
        load: Any,
        query: Any,
        limit: Any,
        method: Any,
        purge_sentinels: Any,
        as_json: Any,
        **opts: Any,
    ) -> None:
        if load is None and query is None and purge_sentinels is None:
            raise CommandError(
                "nothing to do: give --load, --query or --purge-sentinels", returncode=2
            )
        book = AddressBook(guild, method=method)
        names = self._read_names(Path(load)) if load is not None else []
        if query is not None:
            # Validate before loading anything, so bad arguments write nothing.
            validate_prefix(query)
            validate_limit(limit, 1)
        book.client.ping()
        # With --json: one object holding what each action asked for did.
        done: dict[str, Any] = {}
        if names:
            done["loaded"], done["new"] = len(names), self._load(book, names, opts["verbosity"])
            if not as_json:
                self.stdout.write(
                    self.style.SUCCESS(
                        f"Loaded {len(names)} names into {book.guild!r} ({done['new']} new)."
                    )
                )
        if purge_sentinels is not None:
            done["purged"] = book.purge_sentinels(older_than=purge_sentinels)
            if not as_json:
                self.stdout.write(f"Purged {done['purged']} sentinel(s).")
        if query is not None:
            done["completions"] = book.complete(query, limit)
            if not as_json:
                for name in done["completions"]:
                    self.stdout.write(name)
        self.report(done, as_json=as_json)

    def _read_names(self, path: Path) -> list[str]:
        """Return the validated names of ``path``; blank lines are skipped."""
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}", returncode=2) from exc
        except UnicodeDecodeError as exc:
            raise CommandError(f"{path} is not UTF-8: {exc}", returncode=2) from exc
        names, problems = [], []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                names.append(validate_name(line.strip(" "), "member"))
            except ValueError as exc:
                problems.append(f"line {number}: {exc}")
        if problems:
            shown = "\n".join(problems[:10])
            more = f"\n... and {len(problems) - 10} more" if len(problems) > 10 else ""
            raise CommandError(f"{path}: nothing loaded\n{shown}{more}", returncode=2)
        return names

    def _load(self, book: AddressBook, names: list[str], verbosity: int) -> int:
        """Join ``names`` a batch at a time; return how many were new."""
        added = 0
        done = 0
        bar = progress_bar(total=len(names), unit="name", disable=verbosity < 1, stream=self.stderr)
        try:
            for first in range(0, len(names), BATCH):
                batch = names[first : first + BATCH]
                added += book.join_many(batch)
                done += len(batch)
                bar.update(len(batch))
        except KeyboardInterrupt:
            raise CommandError(
                f"interrupted: {done} of {len(names)} names loaded", returncode=130
            ) from None
        finally:
            bar.close()
        return added
