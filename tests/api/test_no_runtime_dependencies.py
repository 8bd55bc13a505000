"""The contract must import with nothing but the standard library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# Modules the interpreter itself provides that are neither stdlib names nor compiled-in
# builtins: the frozen import machinery and the script being run.
INTERPRETER = {"__main__", "_frozen_importlib", "_frozen_importlib_external"}

PROBE = "\n".join(
    [
        "import json, sys",
        "import deerflow_extension_api",
        "print(json.dumps(sorted(sys.modules)))",
    ]
)


def _loaded_modules() -> list[str]:
    # -S: no site, so .pth files (editable installs, coverage hooks) cannot preload
    # third-party modules and mask or fake a dependency.
    completed = subprocess.run(
        [sys.executable, "-S", "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(SRC)},
    )
    modules: list[str] = json.loads(completed.stdout)
    return modules


def test_imports_only_stdlib_and_itself() -> None:
    allowed = set(sys.stdlib_module_names) | set(sys.builtin_module_names) | INTERPRETER
    allowed.add("deerflow_extension_api")
    offenders = sorted(name for name in _loaded_modules() if name.partition(".")[0] not in allowed)
    assert offenders == [], f"non-stdlib modules imported by deerflow_extension_api: {offenders}"


def test_never_imports_the_host() -> None:
    assert not [name for name in _loaded_modules() if name.startswith("deerflow_ext.") or name == "deerflow_ext"]


def test_ships_py_typed() -> None:
    assert (SRC / "deerflow_extension_api" / "py.typed").is_file()
