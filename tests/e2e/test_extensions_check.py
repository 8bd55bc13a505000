"""``deerflow-ext extensions check`` from the command line, on the operator's own config.

The four examples are pip-installed for real and enabled in a copy of
``config.example.yaml`` with ``extensions enable``, as the README tells an operator to;
the check must pass there, and fail — exit 1, the shrunk counterexample as YAML — once a
spend alarm that depends on being listed after ``costs`` is planted in the same list.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deerflow_ext.config.editing import add_plugin
from deerflow_ext.config.loading import app_config_from_text
from e2e.example_packages import PACKAGES, ROOT

pytestmark = pytest.mark.e2e


def _deerflow_ext(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("deerflow-ext")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "deerflow_ext.cli"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    env.pop("DEERFLOW_CONFIG", None)
    return subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def all_examples_enabled(installed_examples: dict[str, str], tmp_path: Path) -> Path:
    config = tmp_path / "config.yaml"
    shutil.copyfile(ROOT / "config.example.yaml", config)
    for name in PACKAGES:
        done = _deerflow_ext("extensions", "enable", name, "--config", str(config), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    return config


def test_the_four_examples_hold_every_property(all_examples_enabled: Path) -> None:
    done = _deerflow_ext("extensions", "check", "--config", str(all_examples_enabled), cwd=all_examples_enabled.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"checking 4 plugins from {all_examples_enabled} (observers, audit, costs, otel), seed ")
    verdicts = [line.split("  ", 1)[0] for line in lines[1:-1]]
    assert verdicts == ["PASS"] * 4, done.stdout
    assert lines[-1] == "4 properties: all hold"
    assert not done.stderr  # the Gateways' own output is captured, not interleaved


def test_a_planted_order_dependence_exits_1_with_the_list_that_shows_it(all_examples_enabled: Path) -> None:
    add_plugin(all_examples_enabled, {"name": "spend", "use": "e2e.planted_spend:install"})
    done = _deerflow_ext(
        "extensions", "check", "--config", str(all_examples_enabled), "--seed", "1", cwd=all_examples_enabled.parent
    )
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1, done.stdout
    assert re.fullmatch(
        r"FAIL  same result whatever the order and whatever a neighbour does \(10 examples, [0-9.]+s\): "
        r"the result differs from the given order's: routes\./api/ext/spend/seen\.body\.tasks: 2 != 1",
        failed[0],
    ), failed[0]
    # The counterexample is the YAML block under that line: a config the operator can paste.
    block = done.stdout.split(failed[0] + "\n", 1)[1].split("\nPASS", 1)[0]
    config = app_config_from_text(block)
    assert [(p.name, p.use) for p in config.plugins] == [("spend", "e2e.planted_spend:install"), ("costs", "costs")]
    assert done.stdout.splitlines()[-1] == "4 properties: 1 failed"
