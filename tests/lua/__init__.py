"""Lua scripts used only by the tests, run the way the app runs its own."""

from pathlib import Path

from redisparts_app.lua import LuaScript


def load_script(client, name: str) -> LuaScript:
    """Return ``tests/lua/<name>.lua`` registered on ``client``."""
    return LuaScript(client, (Path(__file__).parent / f"{name}.lua").read_text("utf-8"))
