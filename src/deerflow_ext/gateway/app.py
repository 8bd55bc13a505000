"""``create_app()``: the Gateway's FastAPI application and its lifespan.

Construction (synchronous, once per app) loads the plugins, publishes the frozen snapshot
and mounts routes — host routes first, then contributed routers, so no extension can take
over a host path. The lifespan owns everything that needs the event loop, in this order:

startup:  database -> migrations -> orphaned-run recovery -> checkpointer -> notification
          loop -> agent host and run manager -> services (registration order); should
          startup fail or be cancelled from here on, the shutdown below runs, stopping every
          service whose start was attempted
shutdown: close fire-and-forget intake -> memory flush -> drain runs (their on_task_stop
          runs) -> stop services (reverse) -> reset the notification loop -> close the
          checkpointer -> dispose the engine

Throughout, a watchdog thread names any extension that blocks the event loop and ends a
service ``start``/``stop`` that blocks it past its timeout (``extensions/boundary/loopwatch.py``);
under ``serve`` the process also ends within the shutdown bound (``exit_bound.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline

from deerflow_extension_api import AgentScope, ExtensionRuntimeDeps

from ..agents.host import AgentHost
from ..agents.model_access import GrantedModelInvoker
from ..agents.policy import project_policy
from ..agents.tools import BUILTIN_TOOL_NAMES
from ..config.loading import ConfigError, load_app_config
from ..config.schema import AppConfig, PluginEntry
from ..config.settings import Settings
from ..expiry import Expiry, default_thread_ttl, store_ttl_config
from ..extensions.boundary.diagnostics import DiagnosticsList
from ..extensions.boundary.loopwatch import DEFAULT_BLOCK_THRESHOLD, LoopWatchdog
from ..extensions.boundary.memwatch import MemoryWatchdog
from ..extensions.contract.snapshot import LoadedExtensions, set_loaded_extensions
from ..extensions.notifications.notification_loop import notification_loop
from ..extensions.plugin_loading.discovery import EntryPointIndex
from ..extensions.plugin_loading.loader import load_extensions
from ..extensions.serving.services_routers import (
    DEFAULT_SERVICE_START_TIMEOUT,
    DEFAULT_SERVICE_STOP_TIMEOUT,
    AttemptedServices,
    ReservedPaths,
    mount_routers,
    start_services,
    stop_services,
)
from ..identity import AuthLoadError, IdentityGate, build_identity_gate
from ..mcp_servers import McpServers
from ..persistence import (
    HostStore,
    create_engine,
    is_sqlite,
    make_session_factory,
    open_checkpointer,
    psycopg_conninfo,
    upgrade_head,
)
from ..persistence.item_store import ItemStore
from ..protocols import ProtocolEndpoints
from ..runtime import LocalThreadCoordinator, PostgresThreadCoordinator, RunManager, ThreadCoordinator
from ..runtime.redis_stream import RedisStreamBridge
from ..runtime.signals import CHANNEL as SIGNAL_CHANNEL
from ..runtime.signals import PostgresRunSignals
from ..runtime.stream import MemoryStreamBridge, StreamBridge
from ..runtime.worker import RunCompletion
from ..scheduling import CronStore, Due, Scheduler, clock_from_env
from ..semantic import store_index_of
from ..skills import SkillShelf
from ..webhooks import WebhookService, filled_headers
from .access import OPEN_PATHS, OPEN_PREFIXES, AccessPolicy, allowed_hosts, declare_token
from .cors import cors_origins
from .door import door
from .errors import TolerantJSONResponse, install_error_handlers
from .exit_bound import DEFAULT_EXIT_GRACE, ExitBound
from .front import GatewayFront
from .host_access import DEFAULT_SETTLE_SECONDS, install_host_access, service_evidence_reader
from .principal import install_principal_resolver
from .protocol_runs import GatewayServedRuns
from .routes import HOST_ROUTERS
from .routes.crons import fire_cron
from .routes.extensions_config import EXTENSIONS_CONFIG_FILE
from .routes.health import package_version
from .routes.stateless import delete_left_threads
from .state import GatewayRuntime
from .webhook_orders import owed_on_recovery

__all__ = ["AgentHostFactory", "GatewayOptions", "create_app", "load_gateway_extensions"]

logger = logging.getLogger("deerflow_ext.gateway")

CRONS_CHANGED = {"kind": "crons"}
"""The run-signal message a cron change sends to every Gateway process (PostgreSQL)."""

_NOTIFICATION_DRAIN = 5.0  # seconds fire-and-forget notifications get at shutdown

AgentHostFactory = Callable[[AppConfig, Any], Any]
"""``factory(config, checkpointer) -> agent host`` (``AgentHost`` on the app's snapshot by default,
which the lifespan also hands the Gateway's LangGraph store: ``factory(..., store=items)``)."""


@dataclass(frozen=True)
class GatewayOptions:
    """Knobs tests and embedders turn; the defaults are the production values.

    ``notify_budget`` None means the spec's 3-second lifecycle budget; ``lease_seconds``
    None means ``$DEERFLOW_THREAD_LEASE_SECONDS`` or 10 s (PostgreSQL thread leases).
    """

    notify_budget: float | None = None
    drain_grace: float = 30.0
    service_start_timeout: float = DEFAULT_SERVICE_START_TIMEOUT
    service_stop_timeout: float = DEFAULT_SERVICE_STOP_TIMEOUT
    coordinator: ThreadCoordinator | None = None
    lease_seconds: float | None = None
    # None: $DEERFLOW_SSE_HEARTBEAT_SECONDS (15 s).
    sse_heartbeat: float | None = None
    # None: the bridge the settings name (Redis with DEERFLOW_REDIS_URL, else in memory).
    streams: StreamBridge | None = None
    loop_block_threshold: float | None = DEFAULT_BLOCK_THRESHOLD  # None: no loop watchdog
    exit_bound: bool = False  # end the process at the shutdown bound (serve only: exit_bound.py)
    exit_grace: float = DEFAULT_EXIT_GRACE
    # Move what startup built out of the collector's generations (serve only: see _lifespan).
    freeze_startup_heap: bool = False


def _default_agent_host(
    extensions: LoadedExtensions, extensions_config: Path, skills: SkillShelf | None = None
) -> AgentHostFactory:
    """``AgentHost`` on this app's snapshot: what it builds outside a run (thread state) uses
    the app's extensions, never the process-wide set another app may have published. Its
    agents get the tools of the MCP servers ``extensions_config`` lists."""

    def factory(config: AppConfig, checkpointer: Any, store: Any = None) -> Any:
        servers = McpServers(extensions_config, config.mcp, reserved_names=(*BUILTIN_TOOL_NAMES, "task"))
        return AgentHost(
            config, checkpointer=checkpointer, extensions=extensions, store=store, skills=skills, mcp_servers=servers
        )

    return factory


def load_gateway_extensions(
    config: AppConfig,
    diagnostics: DiagnosticsList,
    entry_points: EntryPointIndex | None = None,
    *,
    config_file: str = "config.yaml",
) -> LoadedExtensions:
    """Load ``config.plugins`` once; load errors propagate to stop startup.

    The loader itself logs the summary line, so the Gateway does not repeat it.
    ``config_file`` names the file in a record's ``settings:`` errors. A record granted model
    invocation gets its invoker here, for its services.
    """

    def invoker(entry: PluginEntry) -> GrantedModelInvoker | None:
        grant = entry.host_access.model_invocation
        return None if grant is None else GrantedModelInvoker(grant, config, source=entry.name)

    return load_extensions(
        config, entry_points=entry_points, diagnostics=diagnostics, config_file=config_file, model_invokers=invoker
    )


async def _scale_out(
    engine: Any, url: str, opts: GatewayOptions
) -> tuple[ThreadCoordinator, PostgresRunSignals | None]:
    """SQLite: the in-process coordinator, no signals. PostgreSQL: leases and LISTEN/NOTIFY,
    so any number of Gateway processes can share the database (docs/SCALE-OUT.md)."""
    if is_sqlite(url):
        return opts.coordinator or LocalThreadCoordinator(), None
    coordinator = opts.coordinator
    if coordinator is None:
        pg = PostgresThreadCoordinator(engine, lease_seconds=opts.lease_seconds)
        await pg.start()
        coordinator = pg
    return coordinator, PostgresRunSignals(psycopg_conninfo(url))


def _policy(config: AppConfig) -> Any:
    return project_policy(config, AgentScope.LEAD)


def create_app(
    settings: Settings | None = None,
    *,
    config: AppConfig | None = None,
    extensions: LoadedExtensions | None = None,
    agent_host_factory: AgentHostFactory | None = None,
    options: GatewayOptions | None = None,
) -> FastAPI:
    """Build the Gateway. Raises ``ConfigError``, ``ExtensionLoadError`` or
    ``TablePrefixCollisionError`` when it must not start.

    ``config`` and ``extensions`` let tests and embedders skip reading ``config.yaml`` or
    loading plugins; when ``extensions`` is given it is used as the snapshot as-is.

    The snapshot is published as the process-wide set (the spec's fallback for callers that
    publish none), but nothing in the app reads that set back: runs, the agent host, services
    and routers get this app's snapshot and its diagnostics list (``app.state``) explicitly.
    """
    if settings is None:
        settings = Settings()
    if config is None:
        config = load_app_config(settings.config)
    filled_headers(config.webhooks, os.environ, str(settings.config))  # a variable missing: no start, one line
    opts = options or GatewayOptions()
    if opts.sse_heartbeat is None:
        opts = dataclasses.replace(opts, sse_heartbeat=settings.sse_heartbeat_seconds)
    # One entry-point scan serves loading and, later, /api/extensions and /health (which scan
    # on first use when the snapshot was handed in and nothing was loaded here).
    entry_points: EntryPointIndex | None = None
    if extensions is None:
        entry_points = EntryPointIndex.scan()
        extensions = load_gateway_extensions(config, DiagnosticsList(), entry_points, config_file=str(settings.config))
    set_loaded_extensions(extensions)
    diagnostics = extensions.diagnostics  # the list its loading recorded into

    # /docs (Swagger UI) loads its assets from the installed fastapi-offline package, not a
    # CDN, so the documentation works with no network. No /redoc: ReDoc's bundle fetches its
    # logo from its vendor's CDN whatever it is told, and a docs page must not phone out.
    app = FastAPIOffline(
        title="deerflow-ext Gateway",
        version=package_version("deerflow-ext"),
        lifespan=_lifespan,
        redoc_url=None,
        default_response_class=TolerantJSONResponse,
    )
    app.state.settings = settings
    app.state.config = config
    app.state.extensions = extensions
    app.state.extension_diagnostics = diagnostics
    app.state.entry_points = entry_points
    app.state.extensions_config_path = Path(settings.config).parent / EXTENSIONS_CONFIG_FILE
    # store.index resolved now: a bad embed stops startup with one line, not the first put.
    app.state.store_index = store_index_of(config, settings.config)
    # Skills: config.yaml's skills.path (beside it), switched by extensions_config.json.
    skills = SkillShelf(Path(settings.config).parent / config.skills.path, app.state.extensions_config_path)
    app.state.agent_host_factory = agent_host_factory or _default_agent_host(
        extensions, app.state.extensions_config_path, skills
    )
    app.state.agent_host_takes_store = agent_host_factory is None
    app.state.options = opts
    app.state.runtime = None
    install_error_handlers(app)
    for router in HOST_ROUTERS:
        app.include_router(router, dependencies=[Depends(door)])
    # What the Gateway serves without its token is no place for an extension's route (access.py).
    reserved = ReservedPaths(exact=OPEN_PATHS, prefixes=OPEN_PREFIXES)
    app.state.mounted_routers = mount_routers(app, extensions, diagnostics=diagnostics, reserved=reserved)
    app.state.protocol_endpoints = _mount_protocols(app, config)
    # One layer outside the extension-route errors: CORS, the JSON 500, access, body limits,
    # JSON bodies, in that order (front.py).
    origins = cors_origins(settings.cors_origins, config.gateway.cors_origins)
    policy = _access_policy(settings, config, origins)
    identity = _identity_gate(settings, config, policy.token)
    app.state.identity = identity
    if identity is not None:  # the handlers decide; the token is an admin's credential or nothing
        policy = dataclasses.replace(policy, token=None)
    limits = config.gateway.limits
    app.add_middleware(
        GatewayFront,
        policy=policy,
        max_body_bytes=limits.max_body_bytes,
        body_seconds=limits.body_timeout_seconds,
        identity=identity,
    )
    if policy.token is not None or identity is not None:
        declare_token(app, users=identity is not None)
    install_principal_resolver(app, token_required=policy.token is not None, identity=identity is not None)
    install_host_access(app)
    return app


def _identity_gate(settings: Settings, config: AppConfig, token: str | None) -> IdentityGate | None:
    """The ``auth`` section's handlers, or None (no ``auth``: one token, one admin). A bad
    ``auth`` stops startup with its one line (``ConfigError``, as any config mistake)."""
    if config.auth is None:
        return None
    try:
        return build_identity_gate(config.auth, settings.config, token)
    except AuthLoadError as exc:
        raise ConfigError(settings.config, None, "auth", str(exc), problems=(str(exc),)) from exc


def _mount_protocols(app: FastAPI, config: AppConfig) -> ProtocolEndpoints:
    """The agent-protocol endpoints (``protocols/``) under the API prefix, as LangGraph
    mounts them, after every other route: a request to any other path never reaches them.
    They serve while the lifespan runs; ``http.disable_*`` leaves a protocol's paths out."""
    endpoints = ProtocolEndpoints(
        GatewayServedRuns(app),
        version=package_version("deerflow-ext"),
        max_body_bytes=config.gateway.limits.max_body_bytes,
        mcp=not config.http.disable_mcp,
        a2a=not config.http.disable_a2a,
    )
    app.router.routes.extend(endpoints.routes())
    return endpoints


def _access_policy(settings: Settings, config: AppConfig, origins: tuple[str, ...]) -> AccessPolicy:
    """Host names, origins and token in force; each ``DEERFLOW_*`` variable wins over its
    ``gateway:`` key in config.yaml, as for CORS."""
    token = settings.api_token.get_secret_value() if settings.api_token is not None else config.gateway.api_token
    hosts = allowed_hosts(settings.allowed_hosts, config.gateway.allowed_hosts, settings.host)
    return AccessPolicy(hosts=hosts, origins=origins, token=token)


async def _stream_bridge(settings: Settings, opts: GatewayOptions) -> StreamBridge:
    """Redis Streams with ``DEERFLOW_REDIS_URL`` (every process serves every stream), else
    this process's memory. An unreachable Redis stops startup with the variable's name."""
    if opts.streams is not None:
        return opts.streams
    events, seconds = settings.stream_retain_events, settings.stream_retain_seconds
    if not settings.redis_url:
        return MemoryStreamBridge(
            retain_events=events,
            retain_seconds=seconds,
            retain_bytes=max(1, round(settings.stream_retain_mib * 2**20)),
            retain_total_bytes=max(1, round(settings.stream_retain_total_mib * 2**20)),
        )
    bridge = RedisStreamBridge(
        settings.redis_url,
        prefix=settings.redis_prefix,
        retain_events=events,
        retain_seconds=seconds,
        max_connections=settings.redis_max_connections,
    )
    await bridge.start()
    return bridge


def _rollback_hook(agent_host: Any) -> Any:
    """Undo an interrupted run's state changes when it was interrupted with rollback."""

    async def rollback(completion: RunCompletion) -> None:
        states = getattr(agent_host, "thread_states", None)
        if completion.rollback and completion.status == "interrupted" and states is not None:
            if await states.restore_before_run(completion.thread_id, completion.run_id):
                logger.info("run %s rolled back on thread %s", completion.run_id, completion.thread_id)

    return rollback


def _freeze_startup_heap() -> None:
    """Collect once, then freeze everything alive: imports, config, the app, the pools.

    Why: those ~200,000 objects live as long as the process, yet every full collection
    walked them all (~75 ms each on the 2-core bench machine, several a minute under load).
    Frozen, they are never scanned; what runs allocate is collected as before. Only for a
    served process: one that builds many apps (a test session) would keep the cyclic garbage
    of apps that were alive when it froze (measured: ~6% more runs/s served).
    """
    gc.collect()
    gc.freeze()


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state = app.state
    settings, config, extensions = state.settings, state.config, state.extensions
    opts: GatewayOptions = state.options
    url = settings.async_database_url
    watchdog = None
    if opts.loop_block_threshold is not None:
        watchdog = LoopWatchdog(asyncio.get_running_loop(), threshold=opts.loop_block_threshold)
        watchdog.start()
    memory_watch = None
    if settings.memory_watch_mib is not None:
        memory_watch = MemoryWatchdog(asyncio.get_running_loop(), settings.memory_watch_mib)
        memory_watch.start()
    bound: ExitBound | None = None
    durability = settings.database_durability  # every connection of the host: engine, twin, checkpointer
    pool = {} if is_sqlite(url) else {"pool_size": settings.database_pool_size}
    engine = create_engine(url, durability=durability, **pool)
    store: HostStore | None = None
    items: ItemStore | None = None
    webhooks: WebhookService | None = None
    try:
        await upgrade_head(engine, table_prefixes=[p.prefix for p in extensions.table_prefixes])
        store = HostStore(make_session_factory(engine))
        store.default_ttl = default_thread_ttl(config.checkpointer)  # checkpointer.ttl.default_ttl
        webhooks = WebhookService(
            config.webhooks, store.transactions, os.environ, disabled=config.http.disable_webhooks
        )
        # The LangGraph store: /store routes and the graph's runtime.store (store.ttl's defaults,
        # semantic search included).
        items = ItemStore(engine, ttl_config=store_ttl_config(config.store), index=state.store_index)
        expired = await items.sweep_expired()
        if expired:
            logger.info("deleted %d store item(s) past their time to live", expired)
        orphaned = await store.interrupt_orphaned_runs(owed=owed_on_recovery(webhooks))
        if orphaned:
            logger.warning("marked %d run(s) left by a stopped process as interrupted", len(orphaned))
        settled = await store.settle_idle_busy_threads()
        if settled:
            logger.warning("%d thread(s) were busy with no run in flight; status repaired", len(settled))
        async with open_checkpointer(url, durability) as checkpointer:
            notification_loop.register(asyncio.get_running_loop())
            try:
                if state.agent_host_takes_store:
                    agent_host = state.agent_host_factory(config, checkpointer, store=items)
                else:
                    agent_host = state.agent_host_factory(config, checkpointer)
                coordinator, signals = await _scale_out(engine, url, opts)
                streams = await _stream_bridge(settings, opts)
                left = await delete_left_threads(store, agent_host)
                if left:
                    logger.warning("deleted %d stateless run thread(s) a stopped process left behind", left)
                runs = RunManager(
                    store=store,
                    agent_host=agent_host,
                    coordinator=coordinator,
                    extensions=lambda: extensions,
                    notify_budget=opts.notify_budget,
                    completion_hooks=(_rollback_hook(agent_host),),
                    signals=signals,
                    streams=streams,
                    journal=config.gateway.run_journal,
                )
                if signals is not None:
                    await signals.start(runs)
                deps = ExtensionRuntimeDeps(
                    app_store=extensions.app_store,
                    policy=_policy(config),
                    session_factory=store.session_factory,
                    run_evidence_reader=service_evidence_reader(
                        store, getattr(state, "run_evidence_settle_seconds", DEFAULT_SETTLE_SECONDS)
                    ),
                )
                # Every service whose start is attempted is stopped, in reverse, whatever ends
                # this block: a later startup step failing or startup being cancelled included.
                services = AttemptedServices()
                crons: Scheduler | None = None
                expiry: Expiry | None = None
                try:
                    await start_services(
                        extensions,
                        deps,
                        start_timeout=opts.service_start_timeout,
                        diagnostics=state.extension_diagnostics,
                        attempted=services,
                    )
                    crons = _cron_scheduler(state, store)
                    if signals is not None:  # crons changed through another process wake this one
                        signals.subscribe(CRONS_CHANGED["kind"], crons.changed)
                    expiry = Expiry(
                        store.transactions,
                        checkpointer,
                        items,
                        checkpointer_config=config.checkpointer,
                        store_config=config.store,
                    )
                    state.runtime = GatewayRuntime(
                        engine, store, runs, agent_host, checkpointer, items, crons, webhooks=webhooks, expiry=expiry
                    )
                    await crons.start()  # one query; no wake at all while no cron exists
                    await webhooks.start()  # one query: what a stopped process still owed is sent
                    expiry.start()  # a timer each; nothing on a run's path
                    async with state.protocol_endpoints.serving():
                        if opts.freeze_startup_heap:
                            _freeze_startup_heap()
                        yield
                finally:
                    if opts.freeze_startup_heap:
                        gc.unfreeze()
                    if crons is not None:
                        await crons.stop()  # no tick starts a run once the drain began
                    if expiry is not None:
                        await expiry.stop()
                    state.runtime = None
                    if opts.exit_bound:
                        bound = ExitBound(_shutdown_seconds(opts, services), grace=opts.exit_grace).arm()
                    await _shutdown(state, notification_loop, agent_host, runs, services, opts)
            finally:
                notification_loop.reset()
    finally:
        if webhooks is not None:
            await webhooks.stop()  # what the drained runs still owe is sent by the next start
        if store is not None:
            await store.aclose()  # SQLite: its transactions' thread and connection
        if items is not None:
            await items.aclose()
        await engine.dispose()
        if watchdog is not None:
            watchdog.stop()
        if memory_watch is not None:
            memory_watch.stop()
        if bound is not None:
            bound.shutdown_finished()


def _cron_scheduler(state: Any, store: HostStore) -> Scheduler:
    """Crons fire through the routes' run start, on the runtime being served (None once
    shutdown began: the tick's run is then refused and logged)."""

    async def fire(due: Due) -> None:
        await fire_cron(state.runtime, due)

    notify = (SIGNAL_CHANNEL, json.dumps(CRONS_CHANGED))
    return Scheduler(CronStore(store.transactions, notify), fire, clock_from_env())


def _shutdown_seconds(opts: GatewayOptions, services: AttemptedServices) -> float:
    """The ordered shutdown's documented bound (README): runs, notifications, each service."""
    return opts.drain_grace + _NOTIFICATION_DRAIN + opts.service_stop_timeout * len(services.services)


async def _shutdown(state: Any, loop: Any, agent_host: Any, runs: RunManager, services: Any, opts: Any) -> None:
    loop.close_intake()
    memory = getattr(agent_host, "memory", None)
    if memory is not None:
        try:
            await asyncio.to_thread(memory.flush)
        except Exception:
            logger.exception("memory flush failed at shutdown")
    await runs.drain(opts.drain_grace)
    await loop.drain(_NOTIFICATION_DRAIN)
    aclose = getattr(agent_host, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except Exception:
            logger.exception("agent host close failed at shutdown")
    await stop_services(services, stop_timeout=opts.service_stop_timeout, diagnostics=state.extension_diagnostics)
