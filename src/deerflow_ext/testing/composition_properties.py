"""The two property checks that need no Gateway: the composed stacks' ordering, and a failing
install's rollback. They run the host's loader and composition point directly, so they are
cheap enough for many more examples than the served checks of :mod:`.properties`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from deerflow_ext.extensions.contract.snapshot import CONTRIBUTION_KINDS
from deerflow_extension_api import AgentBuildContext, AgentScope

from .entries import Plugin, PluginLike, plugin_records, under_test
from .falsify import falsify, new_seed, reason_of
from .harness import LoadResult, load_plugins
from .neighbours import NEIGHBOUR_USE
from .observation import first_difference
from .strategies import install_failures, neighbour_entries, plugin_lists

__all__ = ["INSTALL_ROLLBACK", "STACK_ORDERING", "check_install_rollback", "check_stack_ordering"]

# -- 2. stack ordering ----------------------------------------------------------------------------
STACK_ORDERING = "lead and subagent stacks keep the host's ordering invariants in every order"
_SCOPES = ((AgentScope.LEAD, "lead"), (AgentScope.SUBAGENT, "general-purpose"))


def _composed(loaded: LoadResult, app_config: Any) -> dict[str, list[Any]]:
    """The final middleware stack of a lead agent and of a subagent, as the builder composes them."""
    from deerflow_ext.agents.lead import build_host_stack
    from deerflow_ext.agents.models import create_chat_model, effective_model_name
    from deerflow_ext.agents.policy import project_policy
    from deerflow_ext.config.schema import AppConfig
    from deerflow_ext.extensions.composition.stack import compose_middleware_stack

    config = AppConfig.model_validate({**dict(app_config or {}), "models": []})
    model = create_chat_model(config)
    stacks: dict[str, list[Any]] = {}
    for scope, agent_name in _SCOPES:
        policy = project_policy(config, scope, agent_name)
        host = build_host_stack(config, scope=scope, model=model, policy=policy)
        ctx = AgentBuildContext(
            scope=scope, agent_name=agent_name, model_name=effective_model_name(model), policy=policy
        )
        stacks[agent_name] = compose_middleware_stack(
            host, extensions=loaded.extensions, ctx=ctx, diagnostics=loaded.diagnostics
        )
    return stacks


def _own_middlewares(stack: Sequence[Any]) -> dict[str, list[str]]:
    from deerflow_ext.extensions.composition.isolation import IsolatedMiddleware

    own: dict[str, list[str]] = {}
    for mw in stack:
        if isinstance(mw, IsolatedMiddleware) and mw.extension != NEIGHBOUR_USE:
            own.setdefault(mw.extension, []).append(type(mw.inner).__qualname__)
    return own


def check_stack_ordering(
    plugins: Iterable[PluginLike],
    *,
    max_neighbours: int = 4,
    examples: int = 50,
    seed: int | None = None,
    app_config: Any = None,
) -> None:
    """For every sampled order, with neighbour middlewares at every placement and scope, the lead
    and subagent stacks pass the host's ``assert_ordering``, nothing is dropped for breaking a
    placement promise, and each entry's own middlewares keep the order they have in the given
    list (their placement and ``order`` decide it, never their neighbours)."""
    from deerflow_ext.extensions.composition.ordering import assert_ordering
    from deerflow_ext.extensions.composition.wrap_fusion import check_fused_groups

    subject = plugin_records(plugins)
    seed = new_seed(seed)
    strategy = plugin_lists(
        subject, neighbours=neighbour_entries(kinds=("middlewares",)), max_neighbours=max_neighbours
    )

    def own(entries: Sequence[Plugin]) -> dict[str, dict[str, list[str]]]:
        stacks = _composed(load_plugins(entries, app_config=app_config), app_config)
        return {agent: _own_middlewares(stack) for agent, stack in stacks.items()}

    def disordered(entries: list[Plugin]) -> str | None:
        loaded = load_plugins(entries, app_config=app_config)
        want = own(under_test(subject, entries))
        for agent, stack in _composed(loaded, app_config).items():
            assert_ordering(stack)
            check_fused_groups(stack)
            dropped = [d for d in loaded.diagnostics.snapshot() if "dropped" in d.message]
            if dropped:
                return f"{agent}: {dropped[0]}"
            difference = first_difference(want[agent], _own_middlewares(stack))
            if difference is not None:
                return f"{agent}: an entry's own middlewares moved: {difference}"
        return None

    falsify(STACK_ORDERING, strategy, disordered, given=subject, examples=examples, seed=seed)


# -- 3. install rollback --------------------------------------------------------------------------
INSTALL_ROLLBACK = "a failing install leaves the registry exactly as before it"
_FIELDS = CONTRIBUTION_KINDS


def _registry(entries: Sequence[Plugin], app_config: Any) -> Any:
    """What a load registered, per kind and in order, by entry name; or the error that stopped it."""
    try:
        loaded = load_plugins(entries, app_config=app_config)
    except Exception as exc:
        return {"stopped": reason_of(exc)}
    ext = loaded.extensions
    registry: dict[str, Any] = {
        kind: [[c.label, c.extension, type(c.contributor).__qualname__] for c in getattr(ext, kind)] for kind in _FIELDS
    }
    registry["loaded"] = list(ext.loaded)
    registry["diagnostics"] = sorted([d.extension, d.phase, d.message] for d in loaded.diagnostics.snapshot())
    return registry


def _fails_to_install(entry: Plugin) -> bool:
    return entry.use == NEIGHBOUR_USE and "fails_after" in entry.config


def check_install_rollback(
    plugins: Iterable[PluginLike],
    *,
    max_neighbours: int = 2,
    examples: int = 50,
    seed: int | None = None,
    app_config: Any = None,
) -> None:
    """For every sampled order, with well-behaved neighbours around, a neighbour whose install
    registers up to three contributions and raises at any step leaves the registry — every
    contribution, in order, the loaded list and every other diagnostic — exactly as the same
    list without that neighbour."""
    subject = plugin_records(plugins)
    seed = new_seed(seed)
    strategy = plugin_lists(
        subject,
        neighbours=neighbour_entries(behaviours=("returns",)),
        max_neighbours=max_neighbours,
        required=(install_failures(),),
    )

    def left_behind(entries: list[Plugin]) -> str | None:
        failing = next(e for e in entries if _fails_to_install(e))
        got = _registry(entries, app_config)
        want = _registry([e for e in entries if e is not failing], app_config)
        if "stopped" not in got:
            mine = [d for d in got["diagnostics"] if d[2].startswith("install() failed: RuntimeError: neighbour")]
            if len(mine) != 1:
                return f"{failing.name} failing left {len(mine)} load diagnostics, not 1"
            got["diagnostics"] = [d for d in got["diagnostics"] if d not in mine]
        difference = first_difference(want, got)
        return None if difference is None else f"{failing.name} failing left the registry different: {difference}"

    falsify(
        INSTALL_ROLLBACK, strategy, left_behind, given=subject, examples=examples, seed=seed, keep=_fails_to_install
    )
