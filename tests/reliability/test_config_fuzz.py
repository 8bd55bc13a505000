"""Hypothesis over ``config.yaml`` at the YAML level.

A mapping used as a key (``? {name: a}``) reached ``doctor``, ``serve`` and ``extensions
enable`` as a raw ``TypeError``. JSON-shaped fuzzing cannot find that: JSON has no complex
keys, anchors, aliases, tags, sets, ordered maps, timestamps, binary scalars or block
scalars. The documents here are generated as YAML *text* — flow and block style, complex keys,
anchors and aliases, tags — sometimes shaped like a real config, sometimes mangled character
by character, sometimes not text at all. Every path an operator drives must answer with a
``ConfigError`` (one ``file:line: field: problem`` line) or succeed:

* loading (``load_app_config``), as ``serve`` and the Gateway do;
* the round-trip editors behind ``extensions enable | disable | remove``; an edit that
  succeeds leaves a file that still loads;
* the CLI itself: ``doctor`` exits 0/1, ``list``/``enable``/``disable`` 0/1/2, and ``serve``
  exits 2 on a broken file — never a traceback.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from deerflow_ext.exitcodes import EXIT_STARTUP, EXIT_USAGE

# -- YAML text -------------------------------------------------------------------------------

_PLAIN_WORDS = st.sampled_from(
    [
        "plugins",
        "name",
        "use",
        "enabled",
        "required",
        "config",
        "table_prefix",
        "models",
        "memory",
        "title",
        "summarization",
        "goal",
        "subagents",
        "token_budget",
        "a",
        "b",
        "x_",
        "true",
        "false",
        "yes",
        "no",
        "on",
        "null",
        "~",
        "0",
        "-1",
        "1e400",
        ".inf",
        "-.inf",
        ".nan",
        "0x1F",
        "0o17",
        "1_000",
        "2001-12-14t21:59:43.10-05:00",
        "2002-12-14",
        "12:30:00",
        "=",
        "<<",
        "faulty_ext:install",
        "fuzz_absent_module:install",
    ]
)
_SPECIAL = st.sampled_from(list(":#-?{}[],&*!|>'\"%@`\t\\ "))
_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)) | _SPECIAL, max_size=12)
_TAGS = st.sampled_from(
    ["!!str", "!!int", "!!float", "!!bool", "!!null", "!!binary", "!!timestamp", "!!map", "!!seq", "!!set",
     "!!omap", "!!pairs", "!custom", "!!python/object:os.system", "!<tag:yaml.org,2002:str>"]
)  # fmt: skip


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


@st.composite
def _scalar(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(_PLAIN_WORDS)
    if kind == 1:
        return _quoted(draw(_TEXT))
    if kind == 2:
        return str(draw(st.integers(-(2**70), 2**70)))
    if kind == 3:
        return repr(draw(st.floats(allow_nan=True, allow_infinity=True)))
    if kind == 4:
        return f"{draw(_TAGS)} {_quoted(draw(_TEXT))}"
    return "'" + draw(_TEXT).replace("'", "''").replace("\n", " ") + "'"


def _flow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    key = st.one_of(_scalar(), children.map(lambda k: f"? {k}"))
    mapping = st.lists(st.tuples(key, children), max_size=4).map(
        lambda pairs: "{" + ", ".join(f"{k} : {v}" if k.startswith("?") else f"{k}: {v}" for k, v in pairs) + "}"
    )
    sequence = st.lists(children, max_size=4).map(lambda items: "[" + ", ".join(items) + "]")
    tagged = st.tuples(st.sampled_from(["!!set", "!!omap", "!!map", "!!seq", "!custom"]), mapping | sequence).map(
        " ".join
    )
    return st.one_of(mapping, sequence, tagged)


_FLOW_NODE = st.recursive(_scalar(), _flow, max_leaves=12)


@st.composite
def _anchored(draw: st.DrawFn) -> str:
    """A flow node, sometimes anchored and then referenced (``&a ... *a``), merge keys included."""
    node = draw(_FLOW_NODE)
    if not draw(st.booleans()):
        return node
    name = draw(st.sampled_from(["a", "b", "x"]))
    alias = draw(st.sampled_from([f"*{name}", f"{{<<: *{name}}}", f"[*{name}, *{name}]", f"{{? *{name} : 1}}"]))
    return f"[&{name} {node}, {alias}]"


@st.composite
def _entry(draw: st.DrawFn) -> str:
    """One ``plugins:`` item in block style, fields drawn from real keys and hostile values."""
    keys = draw(st.lists(st.sampled_from(["name", "use", "enabled", "required", "config", "table_prefix", "enable"]),
                         max_size=6))  # fmt: skip
    lines = [f"{k}: {draw(_anchored())}" for k in keys]
    if draw(st.booleans()):
        lines.append(f"? {draw(_FLOW_NODE)}\n    : {draw(_FLOW_NODE)}")
    if draw(st.booleans()):
        lines.append(f"config: |\n      {draw(_TEXT).replace(chr(10), ' ')}")
    if not lines:
        return "  - " + draw(_anchored())
    return "  - " + "\n    ".join(lines)


@st.composite
def _document(draw: st.DrawFn) -> str:
    sections: list[str] = []
    if draw(st.booleans()):
        sections.append("plugins:\n" + "\n".join(draw(st.lists(_entry(), max_size=3))))
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.one_of(_PLAIN_WORDS, _FLOW_NODE.map(lambda k: f"? {k}\n")))
        sections.append(f"{key}: {draw(_anchored())}")
    if draw(st.booleans()):
        sections.insert(0, draw(st.sampled_from(["%YAML 1.2\n---", "---", "%TAG ! tag:x,2000:\n---", "\ufeff"])))
    if draw(st.booleans()):
        sections.append(draw(st.sampled_from(["...", "---\nsecond: document", "# comment", "\t", "*undefined"])))
    text = "\n".join(sections) + "\n"
    if draw(st.integers(0, 3)) == 0:  # mangle it: insert, delete or replace a few characters
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(_TEXT) + text[at + draw(st.integers(0, 3)) :]
    return text


YAML_TEXT = st.one_of(_document(), _document(), _document(), _TEXT, _FLOW_NODE)
CONFIG_BYTES = st.one_of(YAML_TEXT.map(lambda t: t.encode("utf-8")), st.binary(max_size=64))

REGRESSIONS = [
    "? {name: a}\n: 1\n",
    "plugins:\n  - ? {name: a}\n    : 1\n",
    "plugins:\n  - name: a\n    use: b\n    config: {? [1, 2] : x}\n",
    "? [a, b]\n: 1\n",
    "plugins: [{name: a, use: b}, {<<: {name: c}, use: d}]\n",
    "plugins: !!set {a, b}\n",
    "plugins:\n  - !!omap [name: a, use: b]\n",
    "memory: !!binary aGVsbG8=\n",
    "title: &a [*a]\n",
    "plugins:\n  - name: a\n    use: b\n    table_prefix: !!timestamp 2002-12-14\n",
    '[!!pairs "x", "(", =, plugins]\n',
]

pytestmark = [
    pytest.mark.filterwarnings("ignore::ruamel.yaml.error.ReusedAnchorWarning"),
    # "Exception ignored in ..." is a traceback on the operator's stderr: a failure here.
    pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning"),
]

FUZZ = settings(
    max_examples=int(os.environ.get("DEERFLOW_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    return path


# -- loading ---------------------------------------------------------------------------------


def _load(path: Path) -> Any:
    from deerflow_ext.config.loading import ConfigError, load_app_config

    try:
        return load_app_config(path)
    except ConfigError as exc:
        assert exc.problems and all(line.startswith(str(path)) for line in exc.problems), exc.problems
        return exc


def _loads_or_refuses(tmp_path: Path, data: bytes) -> None:
    from deerflow_ext.config.loading import ConfigError
    from deerflow_ext.config.schema import AppConfig

    assert isinstance(_load(_write(tmp_path, data)), (AppConfig, ConfigError))


@FUZZ
@given(data=CONFIG_BYTES)
def test_loading_answers_a_config_error_or_a_config(tmp_path: Path, data: bytes) -> None:
    _loads_or_refuses(tmp_path, data)


@pytest.mark.parametrize("text", REGRESSIONS)
def test_regressions_are_config_errors_or_configs(tmp_path: Path, text: str) -> None:
    _loads_or_refuses(tmp_path, text.encode())


# -- editing ---------------------------------------------------------------------------------


@FUZZ
@given(data=CONFIG_BYTES, name=st.sampled_from(["a", "b", "x", "faulty_ext:install", ""]), action=st.integers(0, 3))
@example(data=REGRESSIONS[1].encode(), name="a", action=0)
def test_editing_answers_a_clear_error_or_a_file_that_loads(
    tmp_path: Path, data: bytes, name: str, action: int
) -> None:
    from deerflow_ext.config.editing import ConfigEditError, add_plugin, remove_plugin, set_plugin_enabled
    from deerflow_ext.config.loading import ConfigError
    from deerflow_ext.config.schema import AppConfig

    path = _write(tmp_path, data)
    try:
        if action == 0:
            set_plugin_enabled(path, name, True)
        elif action == 1:
            set_plugin_enabled(path, name, False)
        elif action == 2:
            remove_plugin(path, name)
        else:
            add_plugin(path, {"name": name or "n", "use": "fuzz_absent_module:install"})
    except (ConfigError, ConfigEditError):
        assert path.read_bytes() == data  # a refused edit writes nothing
        return
    assert isinstance(_load(path), AppConfig), path.read_text()


_NAMES = st.sampled_from(["a", "b", "x", "ünï", "a b", "a#b", "'q'", "on", "1"])
_ENABLED = st.sampled_from(["true", "false", "True", "FALSE", "!!bool true", '"true"', "yes"])


@st.composite
def _editable(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A config that loads (usually), laid out the ways operators write them."""
    names = draw(st.lists(_NAMES, max_size=4, unique=True))
    flow = draw(st.booleans())
    pad = " " * draw(st.sampled_from([0, 2, 4]))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    items = []
    for name in names:
        fields = [f"name: {_quoted(name)}", "use: fuzz_absent_module:install"]
        if draw(st.booleans()):
            fields.append(f"enabled: {draw(_ENABLED)}")
        if draw(st.booleans()):
            fields.append("config: {k: [1, 2], n: {m: &c x, o: *c}}")
        if flow:
            items.append("{" + ", ".join(fields) + "}")
        else:
            comment = draw(st.sampled_from(["", "  # why", "\t# tab"]))
            items.append(f"{pad}- {fields[0]}{comment}" + "".join(f"{eol}{pad}  {f}" for f in fields[1:]))
    head = draw(st.sampled_from(["", "# deployment notes" + eol, "\ufeff", "memory: {enabled: false}" + eol]))
    if flow:
        body = "plugins: [" + ", ".join(items) + "]" + eol
    else:
        body = ("plugins:" + eol + eol.join(items) + eol) if items else "plugins: []" + eol
    tail = draw(st.sampled_from(["", "title: {max_chars: 10}" + eol, "# end" + eol]))
    return head + body + tail, names


@FUZZ
@given(doc=_editable(), pick=st.integers(0, 5), action=st.integers(0, 3))
def test_edits_do_what_they_say_and_nothing_else(
    tmp_path: Path, doc: tuple[str, list[str]], pick: int, action: int
) -> None:
    from deerflow_ext.config.editing import ConfigEditError, add_plugin, remove_plugin, set_plugin_enabled
    from deerflow_ext.config.loading import ConfigError
    from deerflow_ext.config.schema import AppConfig

    text, names = doc
    path = _write(tmp_path, text.encode())
    before = _load(path)
    name = names[pick] if pick < len(names) else "fresh"
    try:
        if action < 2:
            set_plugin_enabled(path, name, action == 0)
        elif action == 2:
            remove_plugin(path, name)
        else:
            add_plugin(path, {"name": name, "use": "fuzz_absent_module:install"})
    except (ConfigError, ConfigEditError):
        assert path.read_bytes() == text.encode()  # a refused edit writes nothing
        return
    after = _load(path)
    assert isinstance(before, AppConfig) and isinstance(after, AppConfig), path.read_text()
    expected = [e.model_dump() for e in before.plugins]
    if action < 2:
        for e in expected:
            if e["name"] == name:
                e["enabled"] = action == 0
    elif action == 2:
        expected = [e for e in expected if e["name"] != name]
    else:
        expected.append(_fresh(name))
    assert [e.model_dump() for e in after.plugins] == expected
    assert after.model_dump(exclude={"plugins"}) == before.model_dump(exclude={"plugins"})


def _fresh(name: str) -> dict[str, Any]:
    from deerflow_ext.config.schema import PluginEntry

    return PluginEntry(name=name, use="fuzz_absent_module:install").model_dump()


# -- the CLI ---------------------------------------------------------------------------------


def _safe_to_doctor(path: Path) -> bool:
    """Doctor imports every enabled ``use``: only let it import modules made for tests."""
    from deerflow_ext.config.schema import AppConfig

    config = _load(path)
    if not isinstance(config, AppConfig):
        return True
    for entry in config.plugins:
        if entry.enabled:
            module = entry.use.partition(":")[0].split(".")[0]
            if not module.startswith(("fuzz_absent", "faulty_")) and importlib.util.find_spec(module) is not None:
                return False
    return True


def _cli(*args: str) -> tuple[int, str]:
    from deerflow_ext import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue() + err.getvalue()


@FUZZ
@given(data=CONFIG_BYTES, command=st.sampled_from(["doctor", "list", "enable", "disable"]))
@example(data=REGRESSIONS[0].encode(), command="doctor")
@example(data=REGRESSIONS[1].encode(), command="enable")
def test_cli_answers_with_its_documented_exit_codes(tmp_path: Path, data: bytes, command: str) -> None:
    from deerflow_ext.config.schema import AppConfig

    path = _write(tmp_path, data)
    if command == "doctor" and not _safe_to_doctor(path):
        return
    args = ["extensions", command, *(["a"] if command in ("enable", "disable") else []), "--config", str(path)]
    code, output = _cli(*args)
    valid = isinstance(_load(path), AppConfig) or command in ("enable", "disable")
    allowed = {
        "doctor": {0, 1},
        "list": {0} if valid else {EXIT_STARTUP},
        "enable": {0, 1, 2},
        "disable": {0, 1, 2},
    }[command]
    assert code in allowed, (command, code, output)
    assert "Traceback" not in output, output
    if code == EXIT_USAGE or (command == "list" and code == EXIT_STARTUP):
        assert output.startswith("error: "), output


@pytest.mark.parametrize("text", [*REGRESSIONS[:3], REGRESSIONS[-1]])
def test_serve_exits_1_with_one_error_line(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text.encode())
    done = run_cli(tmp_path, "serve", "--port", "0")
    assert done.returncode == EXIT_STARTUP, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), done.stderr
