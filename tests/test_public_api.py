"""The stated public API: every library module says what it exports, and exports it."""

import importlib
import pkgutil

import pytest

import redisparts_app

# Modules Django finds by convention, whose names are not imported by users.
BY_CONVENTION = ("apps", "models", "checks", "migrations", "management.commands", "templatetags")


def _library_modules() -> list[str]:
    found = []
    for info in pkgutil.walk_packages(redisparts_app.__path__, "redisparts_app."):
        inside = info.name.removeprefix("redisparts_app.")
        if not inside.startswith(BY_CONVENTION):
            found.append(info.name)
    return sorted(found)


@pytest.mark.parametrize("name", _library_modules())
def test_every_library_module_states_its_exports(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    missing = [item for item in exported if not hasattr(module, item)]
    assert not missing, f"{name}.__all__ names what it lacks: {missing}"
    assert all(not item.startswith("_") or item == "__version__" for item in exported)
