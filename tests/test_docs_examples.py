"""The runnable pages of the docs run as written, on a project made by django-admin.

Each page of ``RUNNABLE`` (after the pages it builds on) runs in a new project in a temp
folder, against the suite's server (``REDIS_URL``), block by block in page order:

- a ```` ```sh ```` block runs line by line: ``pip`` lines are skipped (the suite's
  environment has the package), ``cd`` changes folder, ``django-admin`` and ``python``
  run with this interpreter; each command must exit 0;
- a ```` ```python ```` block whose first line is ``# file: PATH`` is written to PATH,
  ``# append to: PATH`` is appended to it; any other runs in ``manage.py shell``;
- a ```` ```text ```` block right after a block is what that block prints.

A block meant to be read only is written with a MyST directive (```` ```{code-block} ````),
which none of these pick up (docs/development/tests.md, "Runnable examples").
"""

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"

# page -> the pages whose blocks run first, in the same project
RUNNABLE = {"getting-started.md": [], "tutorial.md": ["getting-started.md"]}
_FENCE = re.compile(r"^```(sh|python|text)\n(.*?)^```$", re.M | re.S)
_TIMEOUT = 120


@dataclass
class Block:
    page: str
    line: int
    language: str
    text: str
    output: str | None = None

    def where(self) -> str:
        return f"{self.page}, line {self.line}"


def blocks(page: str) -> list[Block]:
    """The runnable blocks of ``page``, each with the output the next ``text`` block shows."""
    source = (DOCS / page).read_text()
    found: list[Block] = []
    previous_end = -1
    for match in _FENCE.finditer(source):
        language, text = match.groups()
        line = source.count("\n", 0, match.start()) + 1
        if language == "text":
            between = source[previous_end : match.start()]
            assert found, f"{page}, line {line}: output of no block"
            assert not between.strip(), f"{page}, line {line}: output of no block"
            found[-1].output = text
        else:
            found.append(Block(page, line, language, text))
        previous_end = match.end()
    return found


def test_every_runnable_page_has_blocks_of_each_kind():
    for page in RUNNABLE:
        kinds = {block.language for block in blocks(page)}
        assert kinds == {"sh", "python"}, page
        assert any(block.output for block in blocks(page)), page


def test_the_getting_started_page_shows_a_lock_a_task_and_a_chat_in_that_order():
    text = "\n".join(block.text for block in blocks("getting-started.md"))
    places = [text.index(marker) for marker in ("Lock(", "rp_worker", "create_chat(")]
    assert places == sorted(places)


@pytest.mark.parametrize("page", sorted(RUNNABLE))
def test_the_page_runs_as_written(page, tmp_path, redis_url):
    runner = _Runner(tmp_path, redis_url)
    for name in [*RUNNABLE[page], page]:
        for block in blocks(name):
            runner.run(block)
    assert runner.ran_shell, "no block ran in manage.py shell"


class _Runner:
    def __init__(self, folder: Path, redis_url: str) -> None:
        self.folder = folder
        self.ran_shell = False
        self.env = {
            name: value
            for name, value in os.environ.items()
            if name != "DJANGO_SETTINGS_MODULE" and not name.startswith("REDISPARTS_")
        }
        self.env["REDIS_URL"] = redis_url

    def run(self, block: Block) -> None:
        if block.language == "sh":
            printed = "".join(self._command(block, line) for line in _commands(block.text))
        else:
            printed = self._python(block)
        if block.output is not None:
            assert printed == block.output, f"{block.where()}: printed {printed!r}"

    def _command(self, block: Block, line: str) -> str:
        words = shlex.split(line)
        if words[0] == "pip":
            return ""
        if words[0] == "cd":
            self.folder = self.folder / words[1]
            return ""
        if words[0] == "django-admin":
            words = [sys.executable, "-m", "django", *words[1:]]
        elif words[0] == "python":
            words = [sys.executable, *words[1:]]
        else:
            pytest.fail(f"{block.where()}: no rule runs {words[0]!r}")
        return self._subprocess(block, words)

    def _python(self, block: Block) -> str:
        first, _, rest = block.text.partition("\n")
        for marker, mode in (("# file: ", "w"), ("# append to: ", "a")):
            if first.startswith(marker):
                path = self.folder / first.removeprefix(marker).strip()
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open(mode) as file:
                    file.write("\n" + rest if mode == "a" else rest)
                return ""
        self.ran_shell = True
        shell = [sys.executable, "manage.py", "shell", "--verbosity", "0", "--command"]
        return self._subprocess(block, [*shell, block.text])

    def _subprocess(self, block: Block, words: list[str]) -> str:
        done = subprocess.run(
            words, cwd=self.folder, env=self.env, capture_output=True, text=True, timeout=_TIMEOUT
        )
        assert done.returncode == 0, f"{block.where()}: {words[:4]} failed:\n{done.stderr}"
        return done.stdout


def _commands(text: str) -> list[str]:
    """The commands of a shell block: one a line, comments dropped."""
    lines = (line.split(" #", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]
