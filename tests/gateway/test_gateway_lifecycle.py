"""The lead-run order around the finalizing barrier, interrupts, cancel, failures, shutdown."""

from __future__ import annotations

import asyncio

from gw_fixtures import FakeAgentHost, LifecycleRecorder, ServiceRecorder, extensions_with, kinds, when

from conftest import live_server, read_sse
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.gateway import GatewayOptions, create_app
from deerflow_ext.testing import wait_until


def _body(text: str) -> dict:
    return {"input": {"messages": [{"role": "user", "content": text}]}}


async def _wait_final(client, thread_id: str, run_id: str) -> dict:
    for _ in range(500):
        run = (await client.get(f"/api/threads/{thread_id}/runs/{run_id}")).json()
        if run["status"] not in ("pending", "running"):
            return run
        await asyncio.sleep(0.02)
    raise AssertionError(f"run {run_id} did not finish")


def _app(settings_for, recorder, host, **options):
    return create_app(
        settings_for(),
        config=AppConfig(),
        extensions=extensions_with(lifecycle=recorder),
        agent_host_factory=lambda config, checkpointer: host,
        options=GatewayOptions(**options),
    )


async def test_follow_up_waits_for_previous_on_task_stop_and_end_follows_stop(settings_for) -> None:
    recorder = LifecycleRecorder(stop_delay=0.3)
    host = FakeAgentHost(delay=30)
    app = _app(settings_for, recorder, host)
    async with live_server(app) as server, server.client() as client:
        thread_id = (await client.post("/api/threads")).json()["thread_id"]
        first = (await client.post(f"/api/threads/{thread_id}/runs", json=_body("slow one"))).json()["run_id"]
        await wait_until(lambda: "agent-begin" in kinds(first))
        async with client.stream("POST", f"/api/threads/{thread_id}/runs/stream", json=_body("fast")) as resp:
            events = await read_sse(resp)
        second = events[0][1]["run_id"]
        end_arrival = events[-1][2]
        assert events[-1][0] == "end"

        # The interrupted run got both hooks, in order, before the follow-up's lifecycle began.
        assert kinds(first) == ["start", "agent-begin", "agent-end", "stop-begin", "stop-end"]
        assert recorder.outcomes == {first: "aborted", second: "completed"}
        assert when("stop-end", first) <= when("start", second)
        # Clients see the follow-up's end only after its on_task_stop returned.
        assert when("stop-end", second) <= end_arrival

        old = await _wait_final(client, thread_id, first)
        assert (old["status"], old["outcome"]) == ("interrupted", "aborted")
        new = await _wait_final(client, thread_id, second)
        assert (new["status"], new["outcome"]) == ("success", "completed")
        assert new["token_usage"] == {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}

    # One snapshot per run, everywhere: the agent and both hooks got the same objects.
    for request, extensions, task_store in host.calls:
        assert extensions is app.state.extensions
        assert recorder.stores[request.run_id] == [task_store, task_store]
        assert task_store.scope_id == request.run_id


async def test_slow_on_task_stop_delays_the_end_by_at_most_the_budget(settings_for) -> None:
    budget = 0.3
    recorder = LifecycleRecorder(stop_delay=10)
    app = _app(settings_for, recorder, FakeAgentHost(), notify_budget=budget)
    async with live_server(app) as server, server.client() as client:
        thread_id = (await client.post("/api/threads")).json()["thread_id"]
        async with client.stream("POST", f"/api/threads/{thread_id}/runs/stream", json=_body("hi")) as resp:
            events = await read_sse(resp)
        run_id = events[0][1]["run_id"]
        assert events[-1][0] == "end"
        delay = events[-1][2] - when("stop-begin", run_id)
        assert budget * 0.8 <= delay < budget + 1.0, delay
        assert "stop-end" not in kinds(run_id)  # cancelled at the deadline
        run = await _wait_final(client, thread_id, run_id)
        assert run["status"] == "success"


async def test_run_cancelled_before_admission_gets_no_hooks(settings_for) -> None:
    recorder = LifecycleRecorder(stop_delay=0.5)
    app = _app(settings_for, recorder, FakeAgentHost(delay=30))
    async with live_server(app) as server, server.client() as client:
        thread_id = (await client.post("/api/threads")).json()["thread_id"]
        a = (await client.post(f"/api/threads/{thread_id}/runs", json=_body("slow a"))).json()["run_id"]
        await wait_until(lambda: "agent-begin" in kinds(a))
        b = (await client.post(f"/api/threads/{thread_id}/runs", json=_body("slow b"))).json()["run_id"]
        await wait_until(lambda: "stop-begin" in kinds(a))  # a finalizing, b waiting for the thread
        c = (await client.post(f"/api/threads/{thread_id}/runs", json=_body("fast c"))).json()["run_id"]
        run_b = await _wait_final(client, thread_id, b)
        run_c = await _wait_final(client, thread_id, c)
        assert kinds(b) == []
        assert (run_b["status"], run_b["outcome"], run_b["started_at"]) == ("interrupted", "aborted", None)
        assert run_c["status"] == "success"
        assert when("stop-end", a) <= when("start", c)
        assert (await client.get(f"/api/threads/{thread_id}")).json()["status"] == "idle"


async def test_cancel_route_and_failed_run(settings_for) -> None:
    recorder = LifecycleRecorder()
    host = FakeAgentHost(delay=30)
    app = _app(settings_for, recorder, host)
    async with live_server(app) as server, server.client() as client:
        thread_id = (await client.post("/api/threads")).json()["thread_id"]
        run_id = (await client.post(f"/api/threads/{thread_id}/runs", json=_body("slow"))).json()["run_id"]
        await wait_until(lambda: "agent-begin" in kinds(run_id))
        cancel = await client.post(f"/api/threads/{thread_id}/runs/{run_id}/cancel")
        assert cancel.status_code == 202
        run = await _wait_final(client, thread_id, run_id)
        assert (run["status"], run["outcome"]) == ("interrupted", "aborted")
        # Persistence (step 4) precedes on_task_stop (step 5): the row can be final first.
        await wait_until(lambda: "stop-end" in kinds(run_id))
        assert recorder.outcomes[run_id] == "aborted"
        assert (await client.get(f"/api/threads/{thread_id}")).json()["status"] == "interrupted"

        host.fail = True
        async with client.stream("POST", f"/api/threads/{thread_id}/runs/stream", json=_body("x")) as resp:
            events = await read_sse(resp)
        names = [e for e, _, _ in events]
        assert names[0] == "metadata" and names[-1] == "end" and "error" in names
        failed = events[0][1]["run_id"]
        run = await _wait_final(client, thread_id, failed)
        assert (run["status"], run["outcome"]) == ("error", "failed")
        assert "the model is on fire" in run["error"]
        assert recorder.outcomes[failed] == "failed"
        assert (await client.get(f"/api/threads/{thread_id}")).json()["status"] == "error"
        missing = await client.post(f"/api/threads/{thread_id}/runs/nope/cancel")
        assert missing.status_code == 404 and "nope" in missing.json()["detail"]


async def test_wait_and_join_answer_a_failed_run_with_its_persisted_error(settings_for) -> None:
    # A failed run has no values to answer with: wait (on the run it started) and join (the
    # run already gone from memory) both answer with the error its row holds.
    host = FakeAgentHost(fail=True)
    app = _app(settings_for, LifecycleRecorder(), host)
    async with live_server(app) as server, server.client() as client:
        thread_id = (await client.post("/api/threads")).json()["thread_id"]
        waited = await client.post(f"/api/threads/{thread_id}/runs/wait", json=_body("x"))
        expected = {"__error__": {"error": "ValueError", "message": "the model is on fire"}}
        assert waited.json() == expected
        run_id = waited.headers["Content-Location"].rsplit("/", 1)[-1]
        joined = await client.get(f"/api/threads/{thread_id}/runs/{run_id}/join")
        assert joined.json() == expected
        host.fail = False
        ok = await client.post(f"/api/threads/{thread_id}/runs/wait", json=_body("y"))
        assert "__error__" not in ok.json()


async def test_shutdown_with_two_runs_in_flight(settings_for) -> None:
    from deerflow_ext.extensions.notifications.notification_loop import notification_loop
    from deerflow_ext.persistence import HostStore, create_engine, make_session_factory

    log: list[str] = []
    recorder = LifecycleRecorder(stop_delay=0.1)
    host = FakeAgentHost(delay=30)
    services = (ServiceRecorder("svc_a", log), ServiceRecorder("svc_b", log))
    settings = settings_for()
    app = create_app(
        settings,
        config=AppConfig(),
        extensions=extensions_with(lifecycle=recorder, services=services),
        agent_host_factory=lambda config, checkpointer: host,
    )
    async with live_server(app) as server, server.client() as client:
        assert log == ["start:svc_a", "start:svc_b"]
        runs = []
        for _ in range(2):
            thread_id = (await client.post("/api/threads")).json()["thread_id"]
            run_id = (await client.post(f"/api/threads/{thread_id}/runs", json=_body("slow"))).json()["run_id"]
            runs.append((thread_id, run_id))
        await wait_until(lambda: all("agent-begin" in kinds(r) for _, r in runs))
        await server.stop()

    assert {recorder.outcomes[r] for _, r in runs} == {"aborted"}
    assert all(kinds(r)[-1] == "stop-end" for _, r in runs)
    # Services stop in reverse order, after the runs' on_task_stop returned.
    assert log == ["start:svc_a", "start:svc_b", "stop:svc_b", "stop:svc_a"]
    assert host.closed
    assert notification_loop.loop is None
    leftovers = [t for t in asyncio.all_tasks() if t.get_name().startswith("deerflow-run-")]
    assert leftovers == []

    engine = create_engine(settings.async_database_url)
    try:
        store = HostStore(make_session_factory(engine))
        for thread_id, run_id in runs:
            run = await store.get_run(thread_id, run_id)
            assert run is not None and (run.status, run.outcome) == ("interrupted", "aborted")
    finally:
        await engine.dispose()


async def test_service_start_failure_fails_open_with_attribution(settings_for) -> None:
    log: list[str] = []
    services = (ServiceRecorder("svc_a", log, fail_start=True), ServiceRecorder("svc_b", log))
    app = create_app(
        settings_for(),
        config=AppConfig(),
        extensions=extensions_with(services=services),
        agent_host_factory=lambda config, checkpointer: FakeAgentHost(),
    )
    async with live_server(app) as server, server.client() as client:
        assert (await client.get("/health")).status_code == 200
        diagnostics = app.state.extension_diagnostics.snapshot()
        assert [(d.extension, d.phase) for d in diagnostics] == [("gateway.gw_fixtures:svc_a", "service")]
        assert "svc_a cannot start" in diagnostics[0].message
        deps_a, deps_b = services[0].deps, services[1].deps
        assert deps_a is deps_b
        assert deps_b.app_store is app.state.extensions.app_store
        assert deps_b.session_factory is not None
    # Every service whose start was attempted is stopped, in reverse: a failed start may hold
    # what it acquired before failing (DeerFlow's rule). svc_a's recorder logs successful starts.
    assert log == ["start:svc_b", "stop:svc_b", "stop:svc_a"]
