"""The files ``nox -s tests`` keeps on one worker (tests/worker_groups.py) are still there:
a renamed folder or file would drop out of its group and run beside the others, silently."""

from __future__ import annotations

from pathlib import Path

from worker_groups import SAME_WORKER, scope_of

TESTS = Path(__file__).resolve().parent


def test_every_grouped_path_names_test_files_that_exist() -> None:
    for paths in SAME_WORKER.values():
        for path in paths:
            found = sorted((TESTS / path).glob("test_*.py")) if path.endswith("/") else [TESTS / path]
            assert found and all(f.is_file() for f in found), path


def test_a_grouped_file_runs_in_its_group_and_any_other_alone() -> None:
    e2e = next((TESTS / "e2e").glob("test_*.py")).name
    assert scope_of(f"tests/e2e/{e2e}::test_x[sqlite]") == "group:site-packages"
    assert scope_of("tests/cli/test_install_remove.py::test_y") == "group:site-packages"
    assert scope_of("tests/gateway/test_browser_client.py::test_z") == "group:browser"
    assert scope_of("tests/cli/test_extensions_cli.py::test_w") == "tests/cli/test_extensions_cli.py"
