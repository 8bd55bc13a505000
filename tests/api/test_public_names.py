from __future__ import annotations

import importlib
import pkgutil

import pytest

import deerflow_extension_api as api

MODULES = sorted(info.name for info in pkgutil.iter_modules(api.__path__) if not info.name.startswith("_"))


def test_all_is_importable_and_sorted_unique() -> None:
    assert len(set(api.__all__)) == len(api.__all__)
    for name in api.__all__:
        assert hasattr(api, name), name


@pytest.mark.parametrize("module_name", MODULES)
def test_package_reexports_every_module_name(module_name: str) -> None:
    module = importlib.import_module(f"deerflow_extension_api.{module_name}")
    assert module.__all__, module_name
    for name in module.__all__:
        assert name in api.__all__, f"{module_name}.{name} is not re-exported"
        assert getattr(api, name) is getattr(module, name)
