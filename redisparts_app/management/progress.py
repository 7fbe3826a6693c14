"""Progress of long commands: a tqdm bar when tqdm is installed (the ``progress`` extra),
else a line on the stream at most once a second and at the end."""

import time
from typing import IO, Any

__all__ = ["LineProgress", "progress_bar"]


class LineProgress:
    """tqdm's ``update``/``close``/``n`` as plain lines: ``desc: n/total unit``."""

    def __init__(
        self, *, total: float | None, unit: str, desc: str, stream: IO[str], disable: bool
    ) -> None:
        self.total, self.unit, self.desc, self.stream = total, unit, desc, stream
        self.disable = disable
        self.n: float = 0
        self._shown = time.monotonic()

    def update(self, count: float = 1) -> None:
        self.n += count
        if time.monotonic() - self._shown >= 1.0:
            self._show()

    def close(self) -> None:
        self._show()
        self.disable = True

    def _show(self) -> None:
        self._shown = time.monotonic()
        if self.disable:
            return
        done = f"{self.n:g}/{self.total:g}" if self.total is not None else f"{self.n:g}"
        prefix = f"{self.desc}: " if self.desc else ""
        self.stream.write(f"{prefix}{done} {self.unit}\n")
        self.stream.flush()

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(
    *,
    stream: Any,
    total: float | None = None,
    unit: str = "it",
    desc: str = "",
    disable: bool | None = False,
    unit_scale: bool = False,
    leave: bool = True,
) -> Any:
    """Return a progress bar writing to ``stream`` (a command's ``self.stderr`` is fine).

    ``disable``: True silences it; None shows it only on a terminal (tqdm's meaning).
    """
    stream = getattr(stream, "_out", stream)  # Django's OutputWrapper adds line endings
    try:
        from tqdm import tqdm
    except ImportError:
        quiet = disable is True or (disable is None and not stream.isatty())
        return LineProgress(total=total, unit=unit, desc=desc, stream=stream, disable=quiet)
    return tqdm(
        total=total, unit=unit, desc=desc or None, disable=disable, file=stream,
        unit_scale=unit_scale, leave=leave,
    )  # fmt: skip
