"""Host ordering invariants: what assert_ordering accepts, what it blames, and import hygiene."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from deerflow_ext.agents.lead import build_host_stack
from deerflow_ext.agents.middlewares import (
    ClarificationMiddleware,
    LLMErrorHandlingMiddleware,
    MemoryMiddleware,
    SubagentLimitMiddleware,
    SummarizationMiddleware,
    ThreadDataMiddleware,
    TitleMiddleware,
    TokenBudgetMiddleware,
    ToolErrorHandlingMiddleware,
)
from deerflow_ext.agents.policy import project_policy
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.composition.isolation import IsolatedMiddleware
from deerflow_ext.extensions.composition.ordering import (
    OrderingError,
    assert_ordering,
    core_ordering_constraints,
)
from deerflow_extension_api import AgentScope, Placement

SRC = Path(__file__).resolve().parents[2] / "src"
EXTENSIONS_DIR = SRC / "deerflow_ext" / "extensions"
FORBIDDEN = "deerflow_ext.agents.middlewares"
EXT = "acme:install"


def host_stack() -> list[AgentMiddleware]:
    """The lead's host stack exactly as the builder makes it, so the checks follow the builder."""
    config = AppConfig()
    policy = project_policy(config, AgentScope.LEAD)
    return build_host_stack(config, scope=AgentScope.LEAD, model=FakeListChatModel(responses=["x"]), policy=policy)


def index_of(stack: list[Any], cls: type) -> int:
    return next(i for i, mw in enumerate(stack) if type(mw) is cls)


class ModelWrap(AgentMiddleware):
    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        return handler(request)


class ToolWrap(AgentMiddleware):
    def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        return handler(request)


class NodeOnly(AgentMiddleware):
    def before_model(self, state, runtime):  # type: ignore[no-untyped-def]
        return None


def placed(mw: AgentMiddleware, placement: Placement | None, extension: str = EXT) -> IsolatedMiddleware:
    return IsolatedMiddleware(mw, extension=extension, placement=placement, diagnostics=DiagnosticsList())


# -- host order ---------------------------------------------------------------------------
def test_the_documented_host_stack_passes() -> None:
    assert_ordering(host_stack())


def test_host_classes_absent_from_a_stack_are_skipped() -> None:
    subagent = [
        mw
        for mw in host_stack()
        if not isinstance(mw, (TitleMiddleware, MemoryMiddleware, SubagentLimitMiddleware, ClarificationMiddleware))
    ]
    assert_ordering(subagent)
    assert_ordering([])


def test_retry_layer_after_the_tool_error_handler_is_a_host_error() -> None:
    stack = host_stack()
    retry, tool = index_of(stack, LLMErrorHandlingMiddleware), index_of(stack, ToolErrorHandlingMiddleware)
    stack[retry], stack[tool] = stack[tool], stack[retry]
    with pytest.raises(OrderingError) as caught:
        assert_ordering(stack)
    assert caught.value.extension is None
    assert "ToolErrorHandlingMiddleware precedes LLMErrorHandlingMiddleware" in str(caught.value)


def test_an_inversion_across_a_missing_class_is_still_caught() -> None:
    stack = [ToolErrorHandlingMiddleware(), ThreadDataMiddleware()]  # nothing in between
    with pytest.raises(OrderingError):
        assert_ordering(stack)


def test_clarification_must_be_last() -> None:
    stack = host_stack()
    stack.append(placed(NodeOnly(), Placement.STANDARD))
    with pytest.raises(OrderingError, match="ClarificationMiddleware must be last"):
        assert_ordering(stack)


# -- placement promises, blamed on the extension -------------------------------------------
def test_correct_placements_pass() -> None:
    stack = host_stack()
    retry = index_of(stack, LLMErrorHandlingMiddleware)
    stack[retry:retry] = [
        placed(ToolWrap(), Placement.TOOL_VISIBLE),
        placed(ModelWrap(), Placement.MODEL_LOGICAL),
    ]
    stack[-1:-1] = [
        placed(NodeOnly(), Placement.STANDARD),
        placed(ModelWrap(), Placement.MODEL_PHYSICAL),
        placed(ToolWrap(), Placement.TOOL_RAW),
    ]
    assert_ordering(stack)


MISPLACED = [
    # (middleware, placement, host class it is inserted *before*, promise in the message)
    (ModelWrap, Placement.MODEL_LOGICAL, ToolErrorHandlingMiddleware, "outside the retry layer"),
    (ModelWrap, Placement.MODEL_PHYSICAL, MemoryMiddleware, "inside every model-call wrapper"),
    (ToolWrap, Placement.TOOL_VISIBLE, SummarizationMiddleware, "outermost on the tool axis"),
    (ToolWrap, Placement.TOOL_RAW, SubagentLimitMiddleware, "innermost on the tool axis"),
    (NodeOnly, Placement.STANDARD, TokenBudgetMiddleware, "in the extension slot"),
    (NodeOnly, None, ClarificationMiddleware, "has no placement"),
]


@pytest.mark.parametrize(("cls", "placement", "before", "promise"), MISPLACED)
def test_a_broken_placement_names_the_extension(
    cls: type[AgentMiddleware], placement: Placement | None, before: type, promise: str
) -> None:
    stack = host_stack()
    stack.insert(index_of(stack, before), placed(cls(), placement, extension="blame_me:install"))
    with pytest.raises(OrderingError) as caught:
        assert_ordering(stack)
    assert caught.value.extension == "blame_me:install"
    assert str(caught.value).startswith("Extension blame_me:install: ")
    assert promise in str(caught.value)


def test_a_tool_raw_model_wrapper_may_sit_inside_model_physical() -> None:
    class Both(AgentMiddleware):
        def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
            return handler(request)

        def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
            return handler(request)

    stack = host_stack()
    stack[-1:-1] = [placed(ModelWrap(), Placement.MODEL_PHYSICAL), placed(Both(), Placement.TOOL_RAW)]
    assert_ordering(stack)


def test_core_constraints_cover_every_documented_pair() -> None:
    from deerflow_ext.agents.middlewares import HOST_STACK_ORDER

    pairs = {(c.before, c.after) for c in core_ordering_constraints()}
    n = len(HOST_STACK_ORDER)
    assert len(pairs) == n * (n - 1) // 2
    assert (LLMErrorHandlingMiddleware, ToolErrorHandlingMiddleware) in pairs
    assert all((after, before) not in pairs for before, after in pairs)


# -- no module-scope import of the middleware layer from extensions/ -----------------------
def _module_scope_imports(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """Imports executed at import time: module and class bodies, not function bodies.

    ``if TYPE_CHECKING:`` blocks never run, so they are exempt.
    """
    found: list[tuple[int, str]] = []

    def resolve(module: str | None, level: int) -> str:
        if level == 0:
            return module or ""
        base = package.split(".")[: len(package.split(".")) - (level - 1)]
        return ".".join([*base, module] if module else base)

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.extend((node.lineno, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = resolve(node.module, node.level)
                found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
                found.append((node.lineno, base))
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list) and children and isinstance(children[0], (ast.stmt, ast.excepthandler)):
                    visit([c for c in children if isinstance(c, ast.stmt)])
                    for handler in children:
                        if isinstance(handler, ast.ExceptHandler):
                            visit(handler.body)

    visit(tree.body)
    return found


def _violations(path: Path) -> list[str]:
    # A module's relative imports resolve against its own subpackage of extensions/ (a file
    # outside the tree, as in the scan's own tests, is read as if it sat in extensions/).
    inside = path.is_relative_to(EXTENSIONS_DIR)
    package = ".".join(
        ["deerflow_ext", "extensions", *path.relative_to(EXTENSIONS_DIR).parent.parts]
        if inside
        else ["deerflow_ext", "extensions"]
    )
    return [
        f"{path.name}:{line}: {name}"
        for line, name in _module_scope_imports(ast.parse(path.read_text()), package)
        if name == FORBIDDEN or name.startswith(FORBIDDEN + ".")
    ]


def test_no_extensions_module_imports_the_middleware_layer_at_module_scope() -> None:
    modules = sorted(EXTENSIONS_DIR.rglob("*.py"))
    assert len(modules) >= 8
    problems = [problem for path in modules for problem in _violations(path)]
    assert problems == []


@pytest.mark.parametrize(
    "source",
    [
        "from deerflow_ext.agents.middlewares import ClarificationMiddleware\n",
        "import deerflow_ext.agents.middlewares.errors\n",
        "from deerflow_ext.agents import middlewares\n",
        "from ..agents.middlewares import HOST_STACK_ORDER\n",
        "from ..agents import middlewares\n",
        "try:\n    from deerflow_ext.agents.middlewares import X\nexcept ImportError:\n    pass\n",
        "class Table:\n    from deerflow_ext.agents.middlewares import X\n",
    ],
)
def test_the_scan_catches_every_spelling(tmp_path: Path, source: str) -> None:
    path = tmp_path / "bad.py"
    path.write_text(source)
    assert _violations(path), source


@pytest.mark.parametrize(
    "source",
    [
        "def table():\n    from deerflow_ext.agents.middlewares import X\n",
        "if TYPE_CHECKING:\n    from deerflow_ext.agents.middlewares import X\n",
        "from deerflow_ext.agents.prompts import MEMORY_MARKER\n",
    ],
)
def test_the_scan_allows_deferred_and_unrelated_imports(tmp_path: Path, source: str) -> None:
    path = tmp_path / "ok.py"
    path.write_text(source)
    assert _violations(path) == []


def test_importing_the_extension_runtime_loads_no_middleware_until_first_use() -> None:
    names = sorted(
        "deerflow_ext.extensions." + ".".join(p.relative_to(EXTENSIONS_DIR).with_suffix("").parts)
        for p in EXTENSIONS_DIR.rglob("*.py")
        if p.name != "__init__.py"
    )
    script = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        f"assert {FORBIDDEN!r} not in sys.modules, 'imported at module scope'\n"
        "from deerflow_ext.extensions.composition.ordering import core_ordering_constraints\n"
        "assert core_ordering_constraints()\n"
        f"assert {FORBIDDEN!r} in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={"PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


# -- a stack checked after one of the same shape ---------------------------------------------
def test_a_valid_shape_does_not_vouch_for_another_placement() -> None:
    stack = host_stack()
    stack[-1:-1] = [placed(ModelWrap(), Placement.MODEL_PHYSICAL)]
    assert_ordering(stack)
    moved = host_stack()
    moved.insert(index_of(moved, MemoryMiddleware), placed(ModelWrap(), Placement.MODEL_PHYSICAL))
    with pytest.raises(OrderingError, match="inside every model-call wrapper"):
        assert_ordering(moved)
    same_place_other_promise = host_stack()
    same_place_other_promise[-1:-1] = [placed(ModelWrap(), Placement.MODEL_LOGICAL)]
    with pytest.raises(OrderingError, match="outside the retry layer"):
        assert_ordering(same_place_other_promise)
