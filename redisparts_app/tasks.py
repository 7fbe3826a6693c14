"""The app's maintenance work as registered tasks, for a project to schedule.

Import: ``from redisparts_app import tasks as maintenance`` (rp_worker imports this module
as every installed app's ``tasks``, so a worker knows them; nothing is scheduled until a
project declares it)::

    periodic(every=60, pass_slot=True, name="clean-counters")(maintenance.clean_counters)
    periodic(every=300, name="prune-registries")(maintenance.prune_registries)
    periodic(cron="30 2 * * *", tz="Europe/Paris", name="nightly-backup",
             args=["/var/backups/redis"])(maintenance.backup)

They run on the group's "default" queue, without retries (the next slot is the retry).
"""

import logging
import time

from .services import counters, figures, persistence
from .services.tasks import task

__all__ = ["backup", "clean_counters", "prune_registries"]

logger = logging.getLogger("redisparts.tasks")


@task(name="redisparts.clean_counters", max_retries=0)
def clean_counters(slot: float | None = None, interval: float = 60.0) -> None:
    """One cleaning pass over the counters (``services.counters.clean_counters``).

    ``slot`` (seconds since the epoch; now by default) numbers the pass, so a schedule
    every ``interval`` seconds trims each precision as often as the looping command does.
    """
    number = int((time.time() if slot is None else slot) // interval)
    report = counters.clean_counters(pass_number=number, interval=interval)
    logger.info(
        "counters: checked %d, trimmed %d samples, forgot %d",
        report.checked, report.trimmed, report.forgotten,
    )  # fmt: skip


@task(name="redisparts.prune_registries", max_retries=0)
def prune_registries() -> None:
    """Forget the registered queue groups, locks, semaphores and chats whose keys are gone
    (``services.figures.inventory``: the names nobody noted for two NOTE_INTERVALs)."""
    found = figures.inventory()
    logger.info("registries: %s", {name: len(names) for name, names in found.items()})


@task(name="redisparts.backup", max_retries=0)
def backup(destination: str) -> None:
    """Snapshot the server and copy it into ``destination`` (``services.persistence.backup``;
    the server must run on this machine)."""
    saved = persistence.backup(destination)
    logger.info("backup: %s (%d bytes, sha256 %s)", saved.path, saved.size, saved.sha256)
