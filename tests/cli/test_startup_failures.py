"""Every startup refusal is one line and exit code 1, the same under serve, run and doctor.

Black-box: each case runs ``python -m deerflow_ext.cli`` in a subprocess, as an operator
would, and asserts the whole of stderr (one ``error:`` line, no traceback) and the exit code.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

COMMANDS = (["serve"], ["run", "hello"], ["extensions", "doctor"])


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("error: ")]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


def deerflow(home: Path, *argv: str, env: dict[str, str | None] | None = None, timeout: float = 60) -> Done:
    """``deerflow-ext ARGV`` in ``home``; an ``env`` value of None removes that variable."""
    merged: dict[str, str | None] = {k: v for k, v in os.environ.items() if not k.startswith("DEERFLOW_")}
    merged["DEERFLOW_DATABASE_URL"] = f"sqlite:///{home / 'data' / 'deerflow.db'}"
    merged["DEERFLOW_PORT"] = "0"
    merged.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "deerflow_ext.cli", *argv],
        cwd=home,
        env={k: v for k, v in merged.items() if v is not None},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Done(proc.returncode, proc.stdout, proc.stderr)


def assert_refused(done: Done, line: str) -> None:
    assert done.code == 1, done.err
    assert "Traceback" not in done.err
    assert done.error_lines == [line], done.err


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_bad_variable_is_named_under_every_command(home: Path, command: list[str]) -> None:
    done = deerflow(home, *command, env={"DEERFLOW_PORT": "eighty"})
    assert_refused(
        done, "error: DEERFLOW_PORT='eighty': Input should be a valid integer, unable to parse string as an integer"
    )


def test_a_bad_variable_is_named_under_the_editing_commands_too(home: Path) -> None:
    done = deerflow(home, "extensions", "list", env={"DEERFLOW_LOG_FORMAT": "xml"})
    assert_refused(done, "error: DEERFLOW_LOG_FORMAT='xml': Input should be 'text' or 'json'")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_config_path_that_does_not_exist_is_an_error(home: Path, command: list[str]) -> None:
    missing = home / "conf" / "config.yaml"
    done = deerflow(home, *command, "--config", str(missing))
    assert_refused(done, f"error: {missing}: does not exist (named by --config); create it or fix the path")
    done = deerflow(home, *command, env={"DEERFLOW_CONFIG": str(missing)})
    assert_refused(done, f"error: {missing}: does not exist (named by DEERFLOW_CONFIG); create it or fix the path")


KNOWN = (
    "langchain-openai, langchain-anthropic, langchain-google-genai, langchain-google-vertexai, langchain-aws, "
    "langchain-mistralai, langchain-groq, langchain-ollama, langchain-deepseek, langchain-fireworks, "
    "langchain-community"
)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_missing_known_provider_package_names_its_pip_command(home: Path, command: list[str]) -> None:
    config = home / "config.yaml"
    config.write_text("models:\n  - name: big\n    use: langchain_groq:ChatGroq\n    model: x\n")
    done = deerflow(home, *command, "--config", str(config))
    assert_refused(
        done,
        f"error: {config}:3: models[0].use: cannot import langchain_groq: "
        "langchain_groq is not installed; pip install langchain-groq",
    )


@pytest.mark.parametrize("module", ["langchain_opneai", "langchain_nosuchprovider"])
def test_a_typo_in_the_module_gets_no_module_and_the_known_packages_never_a_made_up_pip_name(
    home: Path, module: str
) -> None:
    config = home / "config.yaml"
    config.write_text(f"models:\n  - name: big\n    use: {module}:ChatOpenAI\n    model: x\n")
    done = deerflow(home, "extensions", "doctor", "--config", str(config))
    mean = " (did you mean langchain_openai?)" if module == "langchain_opneai" else ""
    assert_refused(
        done,
        f"error: {config}:3: models[0].use: cannot import {module}: "
        f"no module named {module}{mean}; the known provider packages are {KNOWN}",
    )
    assert "pip install" not in done.err


def test_a_dot_where_the_colon_goes_is_said_in_words_with_the_fix(home: Path) -> None:
    config = home / "config.yaml"
    config.write_text("models:\n  - name: big\n    use: langchain_openai.ChatOpenAI\n    model: x\n")
    done = deerflow(home, "extensions", "doctor", "--config", str(config))
    assert_refused(
        done,
        f"error: {config}:3: models[0].use: must be module:Class — the module to import, a colon, then the "
        "class in it; did you mean langchain_openai:ChatOpenAI?",
    )
    assert done.out == f"The Gateway would not start: {config} is invalid.\n"


def test_a_port_given_as_a_flag_is_named_as_the_flag(home: Path) -> None:
    done = deerflow(home, "serve", "--port", "99999")
    assert_refused(done, "error: --port=99999: Input should be less than or equal to 65535")
    done = deerflow(home, "serve", env={"DEERFLOW_PORT": "99999"})
    assert_refused(done, "error: DEERFLOW_PORT='99999': Input should be less than or equal to 65535")


def test_a_short_api_token_is_refused_in_words_without_showing_it(home: Path) -> None:
    advice = "an API token needs at least 16, e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
    done = deerflow(home, "serve", env={"DEERFLOW_API_TOKEN": "hunter2"})
    assert_refused(done, f"error: DEERFLOW_API_TOKEN='<hidden>': too short (7 characters); {advice}")
    config = home / "config.yaml"
    config.write_text("gateway:\n  api_token: hunter2\n")
    done = deerflow(home, "serve", "--config", str(config))
    assert_refused(done, f"error: {config}:2: gateway.api_token: too short (7 characters); {advice}")
    assert "hunter2" not in done.err


def test_models_are_checked_for_arguments_and_credentials_each_on_its_own_line(home: Path) -> None:
    config = home / "config.yaml"
    config.write_text(
        "models:\n"
        "  - name: big\n"
        "    use: langchain_openai:ChatOpenAI\n"
        "    model: gpt-4o\n"
        "    temperature: warm\n"
        "    api_key: sk-test\n"
        "  - name: nokey\n"
        "    use: langchain_openai:ChatOpenAI\n"
        "    model: gpt-4o-mini\n"
    )
    env: dict[str, str | None] = {"OPENAI_API_KEY": None, "OPENAI_ADMIN_KEY": None}
    done = deerflow(home, "extensions", "doctor", "--config", str(config), env=env)
    assert done.code == 1 and "Traceback" not in done.err
    first, second = done.error_lines
    assert first.startswith(f"error: {config}:5: models[0].temperature: langchain_openai:ChatOpenAI: Input should be")
    assert second.startswith(f"error: {config}:7: models[1]: langchain_openai:ChatOpenAI cannot be constructed: ")
    assert "OPENAI_API_KEY" in second
    # The file is fine; a model in it cannot be used: doctor says that, not "invalid".
    assert done.out == f"The Gateway would not start: a model entry of {config} cannot be used (see the error line).\n"
    serve = deerflow(home, "serve", "--config", str(config), env=env)
    assert serve.code == 1 and serve.error_lines == done.error_lines


@pytest.mark.parametrize("command", COMMANDS[:2], ids=" ".join)
def test_an_unsupported_database_url_is_refused(home: Path, command: list[str]) -> None:
    done = deerflow(home, *command, env={"DEERFLOW_DATABASE_URL": "mysql://root:hunter2@db/deerflow"})
    assert_refused(
        done,
        "error: DEERFLOW_DATABASE_URL: unsupported database URL 'mysql://root:***@db/deerflow': "
        "use sqlite+aiosqlite:///path or postgresql+asyncpg://...",
    )


@pytest.mark.parametrize("command", COMMANDS[:2], ids=" ".join)
def test_an_unreachable_postgresql_is_named_with_its_password_hidden(home: Path, command: list[str]) -> None:
    done = deerflow(home, *command, env={"DEERFLOW_DATABASE_URL": "postgresql://deer:hunter2@127.0.0.1:1/flow"})
    assert done.code == 1 and "Traceback" not in done.err and "hunter2" not in done.err
    (line,) = done.error_lines
    assert line.startswith("error: database postgresql://deer:***@127.0.0.1:1/flow is unreachable: ")


def test_a_database_directory_that_cannot_be_created_is_named(home: Path) -> None:
    (home / "afile").write_text("not a directory")
    done = deerflow(home, "serve", env={"DEERFLOW_DATABASE_URL": f"sqlite:///{home / 'afile' / 'db' / 'x.db'}"})
    directory, blocker = home / "afile" / "db", home / "afile"
    assert_refused(done, f"error: database directory {directory} cannot be created: {blocker} is not a directory")


@pytest.fixture
def read_only_dir(home: Path) -> Iterator[Path]:
    """A directory nobody, root included, may write to (the immutable attribute)."""
    path = home / "readonly"
    path.mkdir()
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("cannot make a directory unwritable here (chattr +i unavailable or not permitted)")
    try:
        yield path
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)


@pytest.mark.parametrize("command", COMMANDS[:2], ids=" ".join)
def test_a_database_directory_that_is_not_writable_is_named(
    read_only_dir: Path, home: Path, command: list[str]
) -> None:
    done = deerflow(home, *command, env={"DEERFLOW_DATABASE_URL": f"sqlite:///{read_only_dir / 'deerflow.db'}"})
    assert_refused(done, f"error: database directory {read_only_dir} is not writable (SQLite writes deerflow.db there)")


def test_a_port_in_use_is_found_before_migrations(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = deerflow(home, "serve", "--port", str(port))
    assert_refused(
        done, f"error: port {port} on 127.0.0.1 is already in use (another Gateway?); set --port or DEERFLOW_PORT"
    )
    assert not (home / "data" / "deerflow.db").exists(), "nothing was migrated before the port was checked"
    assert "startup complete" not in done.err


def test_a_required_extension_that_fails_is_one_line(home: Path) -> None:
    config = home / "config.yaml"
    config.write_text("plugins:\n  - name: must\n    use: no_such_module_xyz:install\n    required: true\n")
    for command in COMMANDS:
        done = deerflow(home, *command, "--config", str(config))
        assert done.code == 1 and "Traceback" not in done.err, done.err
        assert "required extension no_such_module_xyz:install failed to install" in done.err + done.out
