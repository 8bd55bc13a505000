"""The official JS client in a real browser, against the Gateway, from another origin.

``browser_page/`` is a small chat page of ours on ``@langchain/langgraph-sdk`` (``useStream``
for the conversation, ``Client`` for the thread list), bundled with esbuild from the npm
packages of its committed lock file. It is served from ``localhost:<port>`` while the Gateway
is ``127.0.0.1:<other port>``, so every call is a cross-origin request with a CORS preflight,
and it runs in Debian's Chromium. The Gateway is a real one (embedded model, SQLite) with
the gate extension (``sdk_gate_ext``), which holds a run at ``gate:<name>`` until the test
opens it: the page is reloaded while its run is certainly in flight. The human-in-the-loop
cases run on a second Gateway that also loads ``platform_api.hitl_ext`` (LangChain's
``HumanInTheLoopMiddleware`` gating the ``task`` tool): the page shows the paused call in its
inbox and resumes the run with the user's decision. The full-stack plugin case runs on a third
Gateway with ``plugins_examples/fullstack`` enabled: the page finds it through ``GET
/api/plugins``, imports its packaged module from the Gateway, mounts its page, and runs its
conversation action and its page's actions. The identity case runs on a fourth Gateway with
the shipped ``examples/auth/auth.py`` (JWT) as its ``auth``: a page signed in as each of two
users (``?token=``, sent as a bearer token on every request, the stream's included) lists
and opens only that user's threads.

A console error fails a test: that is how a browser reports a CORS refusal.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from browser_support import (
    build_page,
    launched_chromium,
    loopback_only,
    require_browser,
    screenshot_dir,
    served_from,
)
from langgraph_sdk import get_sync_client
from sdk_server import SdkServer, sdk_server

pytestmark = pytest.mark.e2e

WAIT_MS = 60_000
HITL = [{"name": "hitl", "use": "platform_api.hitl_ext:install"}]
FULLSTACK_SRC = Path(__file__).resolve().parents[2] / "plugins_examples" / "fullstack" / "src"
NOTES = "example.notes"
NOTES_TOOL = "ext_example_notes_remember_" + hashlib.sha256(b"example.notes:remember").hexdigest()[:12]
AUTH_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "auth" / "auth.py"
AUTH_SECRET = "browser-identity-secret-0123456789abcdef"
FULLSTACK = [
    {
        "name": "fullstack",
        "use": "deerflow_fullstack:install",
        "settings": {NOTES: {"enabled": True, "max_notes": 5, "heading": "Team notes"}},
    }
]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    require_browser(page=True)
    with sdk_server(tmp_path_factory.mktemp("browser-gateway")) as running:
        yield running


@pytest.fixture(scope="module")
def hitl_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    require_browser(page=True)
    with sdk_server(tmp_path_factory.mktemp("browser-hitl-gateway"), plugins=HITL) as running:
        yield running


@pytest.fixture(scope="module")
def notes_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    """The full-stack example, imported from its source tree (the e2e suite pip-installs it)."""
    require_browser(page=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(FULLSTACK_SRC))
        with sdk_server(tmp_path_factory.mktemp("browser-notes-gateway"), plugins=FULLSTACK) as running:
            yield running
        sys.modules.pop("deerflow_fullstack.notes", None)
        sys.modules.pop("deerflow_fullstack", None)


@pytest.fixture(scope="module")
def auth_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    """The JWT example as the Gateway's ``auth``, loaded unchanged next to its config file."""
    require_browser(page=True)
    directory = tmp_path_factory.mktemp("browser-auth-gateway")
    shutil.copy(AUTH_EXAMPLE, directory / "auth.py")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUTH_JWT_SECRET", AUTH_SECRET)
        with sdk_server(directory, sections={"auth": {"path": "./auth.py:auth"}}) as running:
            yield running


def user_token(subject: str) -> str:
    return jwt.encode({"sub": subject, "permissions": []}, AUTH_SECRET, algorithm="HS256")


@pytest.fixture(scope="module")
def page_origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_browser(page=True)
    with served_from(build_page(tmp_path_factory.mktemp("browser-page"))) as origin:
        yield origin


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser(page=True)
    with launched_chromium() as launched:
        yield launched


@dataclass
class Tab:
    page: Any
    console_errors: list[str]
    escaped: list[str]
    shots: Path

    def seen(self) -> dict[str, Any]:
        """What the page recorded since it was (re)loaded (``window.__deerflow``)."""
        return dict(self.page.evaluate("window.__deerflow"))

    def wait_loaded(self) -> None:
        """Until the thread list is drawn; a refused request (CORS) fails here, saying why."""
        threads = self.page.wait_for_selector("[data-testid=threads][data-loaded]", timeout=WAIT_MS)
        assert threads.get_attribute("data-loaded") == "true", (threads.inner_text(), self.console_errors)

    def send(self, text: str) -> None:
        self.page.fill("[data-testid=input]", text)
        self.page.click("[data-testid=send]")

    def wait_idle(self) -> None:
        self.page.wait_for_function(
            "document.querySelector('[data-testid=status]')?.textContent === 'idle' && window.__deerflow.finished > 0",
            timeout=WAIT_MS,
        )

    def messages(self) -> list[tuple[str, str]]:
        rows = self.page.locator("main [data-testid=message]")
        return [(rows.nth(i).get_attribute("data-type") or "", rows.nth(i).inner_text()) for i in range(rows.count())]

    def thread_id(self) -> str:
        return str(self.page.locator("[data-testid=thread-id]").inner_text())

    def shot(self, name: str) -> None:
        (self.shots / f"{name}.png").write_bytes(self.page.screenshot(full_page=True))


@contextmanager
def opened_tab(browser: Any, gateway: SdkServer, page_origin: str, tmp_path: Path, *, query: str = "") -> Iterator[Tab]:
    """A fresh browser context on the page, talking to ``gateway`` (``query``: more of the
    page's parameters, ``&token=...``)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    escaped = loopback_only(context)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    # favicon.ico is the only thing our static origin does not have; the browser asks anyway.
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    page.goto(f"{page_origin}?api={gateway.url}{query}")
    try:
        tab = Tab(page, errors, escaped, screenshot_dir(tmp_path))
        tab.wait_loaded()
        yield tab
    finally:
        context.close()


@pytest.fixture
def tab(browser: Any, gateway: SdkServer, page_origin: str, tmp_path: Path) -> Iterator[Tab]:
    with opened_tab(browser, gateway, page_origin, tmp_path) as opened:
        yield opened


def assert_clean(tab: Tab) -> None:
    assert tab.console_errors == [], tab.console_errors
    assert tab.escaped == []
    assert tab.seen()["errors"] == []


def test_the_page_is_on_another_origin(tab: Tab, gateway: SdkServer) -> None:
    origin = tab.page.evaluate("window.location.origin")
    assert origin.startswith("http://localhost:") and not gateway.url.startswith(origin)


def test_a_message_streams_the_reply_and_the_task_tool_result(tab: Tab, gateway: SdkServer) -> None:
    tab.send("delegate: summarise the plan")
    tab.page.wait_for_selector("main [data-type=tool][data-name=task]", timeout=WAIT_MS)
    tab.wait_idle()
    tab.shot("streamed-reply")

    assert tab.messages() == [
        ("human", "delegate: summarise the plan"),
        ("ai", 'calls task({"description":"summarise the plan","prompt":"summarise the plan"})'),
        ("tool", "tool result (task): Here is my answer to: summarise the plan"),
        ("ai", "Done. task returned: Here is my answer to: summarise the plan"),
    ]
    seen = tab.seen()
    # The tool result and the reply were rendered from the stream, while the run was going,
    # not only from the state the page reads once it has ended.
    assert "tool:Here is my answer to: summarise the plan" in seen["streamed"]
    assert "ai:Done. task returned: Here is my answer to: summarise the plan" in seen["streamed"]
    # The host's own title call is tagged nostream: its answer never reaches the chat.
    assert not any(s.startswith("ai:Delegate") for s in seen["streamed"]), seen["streamed"]
    [created] = seen["created"]
    thread_id = tab.thread_id()
    assert created["thread_id"] == thread_id and thread_id in tab.page.url
    run = get_sync_client(url=gateway.url, api_key=None).runs.get(thread_id, created["run_id"])
    assert run["status"] == "success"
    assert_clean(tab)


def test_a_reload_mid_run_rejoins_the_stream_and_misses_nothing(tab: Tab, gateway: SdkServer) -> None:
    gate = SdkServer.gate()
    tab.send(f"delegate: gate:{gate} check the weather")
    tab.page.wait_for_function(
        f"window.__deerflow.custom.some(e => e.gate === '{gate}' && e.state === 'waiting')", timeout=WAIT_MS
    )
    [created] = tab.seen()["created"]

    tab.page.reload()  # the run is held at the gate: useStream must rejoin it (reconnectOnMount)
    tab.wait_loaded()
    assert tab.thread_id() == created["thread_id"]
    # The rejoined stream replays the run from its first event: the gate's event again.
    tab.page.wait_for_function(
        f"window.__deerflow.custom.some(e => e.gate === '{gate}' && e.state === 'waiting')", timeout=WAIT_MS
    )
    assert tab.page.locator("[data-testid=status]").inner_text() == "streaming"
    gateway.open_gate(gate)
    tab.page.wait_for_selector("main [data-type=tool][data-name=task]", timeout=WAIT_MS)
    tab.wait_idle()
    tab.shot("rejoined-after-reload")

    task = f"gate:{gate} check the weather"
    assert tab.messages() == [
        ("human", f"delegate: {task}"),
        ("ai", f'calls task({{"description":"{task}","prompt":"{task}"}})'),
        ("tool", f"tool result (task): Here is my answer to: {task}"),
        ("ai", f"Done. task returned: Here is my answer to: {task}"),
    ]
    seen = tab.seen()
    assert seen["created"] == []  # nothing was submitted again: the page joined the same run
    assert f"ai:Done. task returned: Here is my answer to: {task}" in seen["streamed"]
    assert [e["state"] for e in seen["custom"] if e.get("gate") == gate] == ["waiting", "open"]
    client = get_sync_client(url=gateway.url, api_key=None)
    assert client.runs.get(created["thread_id"], created["run_id"])["status"] == "success"
    assert len(client.runs.list(created["thread_id"])) == 1
    assert_clean(tab)


def test_after_a_reload_the_thread_list_and_history_come_back(tab: Tab, gateway: SdkServer) -> None:
    tab.send("delegate: draft the agenda")
    tab.wait_idle()
    thread_id = tab.thread_id()
    before = tab.messages()

    tab.page.reload()
    tab.page.wait_for_selector(f"[data-testid=thread][data-thread-id='{thread_id}']", timeout=WAIT_MS)
    history = get_sync_client(url=gateway.url, api_key=None).threads.get_history(thread_id, limit=50)
    tab.page.wait_for_function(
        f"document.querySelectorAll('[data-testid=checkpoint]').length === {len(history)}", timeout=WAIT_MS
    )
    tab.shot("thread-and-history-after-reload")
    assert tab.messages() == before  # rebuilt from the thread's state history, not from memory
    entry = tab.page.locator(f"[data-testid=thread][data-thread-id='{thread_id}']")
    title = get_sync_client(url=gateway.url, api_key=None).threads.get(thread_id)["values"]["title"]
    assert entry.inner_text().startswith(title)
    steps = tab.page.locator("[data-testid=checkpoint]").all_inner_texts()
    assert steps[0] == "step -1 · 0 messages" and steps[-1].endswith(f"{len(before)} messages")  # oldest first

    # Leave the thread and pick it again from the list: the same conversation comes back.
    tab.page.click("[data-testid=new-thread]")
    tab.page.wait_for_function("document.querySelectorAll('main [data-testid=message]').length === 0")
    entry.click()
    tab.page.wait_for_function(
        f"document.querySelectorAll('main [data-testid=message]').length === {len(before)}", timeout=WAIT_MS
    )
    assert tab.messages() == before
    assert_clean(tab)


@pytest.fixture
def hitl_tab(browser: Any, hitl_gateway: SdkServer, page_origin: str, tmp_path: Path) -> Iterator[Tab]:
    with opened_tab(browser, hitl_gateway, page_origin, tmp_path) as opened:
        yield opened


def wait_listed_as(tab: Tab, thread_id: str, status: str) -> None:
    """Until the thread list (refetched when a run ends) shows the thread with ``status``."""
    tab.page.wait_for_function(
        f"document.querySelector(\"[data-testid=thread][data-thread-id='{thread_id}']\")"
        f"?.textContent.endsWith('({status})')",
        timeout=WAIT_MS,
    )


def wait_paused(tab: Tab) -> str:
    """Until the run has stopped on the interrupt and the inbox shows it; its interrupt id."""
    item = tab.page.wait_for_selector("[data-testid=inbox-item]", timeout=WAIT_MS)
    tab.page.wait_for_function(
        "document.querySelector('[data-testid=status]')?.textContent === 'interrupted'", timeout=WAIT_MS
    )
    return str(item.get_attribute("data-interrupt-id"))


def assert_paused_on_task(tab: Tab, gateway: SdkServer, thread_id: str, interrupt_id: str, task: str) -> None:
    """The inbox shows the gated ``task`` call; the server says the thread waits on that interrupt."""
    assert tab.page.locator("[data-testid=gated-name]").all_inner_texts() == ["task"]
    args = json.loads(tab.page.locator("[data-testid=gated-args]").inner_text())
    assert args == {"description": task, "prompt": task}
    assert tab.page.locator("[data-testid=approve]").is_enabled()
    assert tab.page.locator("[data-testid=reject]").is_enabled()
    assert tab.messages() == [
        ("human", f"delegate: {task}"),
        ("ai", f"calls task({json.dumps(args, separators=(',', ':'))})"),
    ]  # the tool has not run
    thread = get_sync_client(url=gateway.url, api_key=None).threads.get(thread_id)
    assert thread["status"] == "interrupted"
    assert [i["id"] for pending in thread["interrupts"].values() for i in pending] == [interrupt_id]


def test_a_gated_tool_call_waits_in_the_inbox_and_approve_runs_it(hitl_tab: Tab, hitl_gateway: SdkServer) -> None:
    tab = hitl_tab
    tab.send("delegate: count the stars")
    interrupt_id = wait_paused(tab)
    thread_id = tab.thread_id()
    assert_paused_on_task(tab, hitl_gateway, thread_id, interrupt_id, "count the stars")
    wait_listed_as(tab, thread_id, "interrupted")  # the thread list, refetched when the run stopped
    tab.shot("inbox")

    tab.page.click("[data-testid=approve]")
    tab.page.wait_for_selector("main [data-type=tool][data-name=task]", timeout=WAIT_MS)
    tab.wait_idle()
    wait_listed_as(tab, thread_id, "idle")
    tab.shot("approved")

    assert tab.page.locator("[data-testid=inbox-item]").count() == 0
    assert tab.messages() == [
        ("human", "delegate: count the stars"),
        ("ai", 'calls task({"description":"count the stars","prompt":"count the stars"})'),
        ("tool", "tool result (task): Here is my answer to: count the stars"),
        ("ai", "Done. task returned: Here is my answer to: count the stars"),
    ]
    seen = tab.seen()
    assert seen["resumed"] == [{"resume": {"decisions": [{"type": "approve"}]}}]
    first, second = seen["created"]
    assert first["thread_id"] == second["thread_id"] == thread_id
    client = get_sync_client(url=hitl_gateway.url, api_key=None)
    assert client.threads.get(thread_id)["status"] == "idle"
    assert client.runs.get(thread_id, first["run_id"])["status"] == "interrupted"
    assert client.runs.get(thread_id, second["run_id"])["status"] == "success"
    assert_clean(tab)


def test_reject_resumes_without_the_tool_and_shows_the_reason_as_its_error(
    hitl_tab: Tab, hitl_gateway: SdkServer
) -> None:
    tab = hitl_tab
    tab.send("delegate: book the flights")
    wait_paused(tab)
    thread_id = tab.thread_id()
    tab.page.fill("[data-testid=reject-reason]", "not in this quarter's budget")
    tab.page.click("[data-testid=reject]")
    tab.page.wait_for_selector("main [data-type=tool][data-name=task]", timeout=WAIT_MS)
    tab.wait_idle()
    wait_listed_as(tab, thread_id, "idle")
    tab.shot("rejected")

    assert tab.page.locator("[data-testid=inbox-item]").count() == 0
    tool = tab.page.locator("main [data-type=tool][data-name=task]")
    assert tool.get_attribute("data-status") == "error"
    assert tool.inner_text().startswith("tool error (task): ")
    assert "not in this quarter's budget" in tool.inner_text()
    assert "Here is my answer" not in "".join(text for _, text in tab.messages())  # the task never ran
    assert tab.seen()["resumed"] == [
        {"resume": {"decisions": [{"type": "reject", "message": "not in this quarter's budget"}]}}
    ]
    # The page shows what the thread holds: the same tool message, marked as an error.
    values = get_sync_client(url=hitl_gateway.url, api_key=None).threads.get_state(thread_id)["values"]
    [stored] = [m for m in values["messages"] if m["type"] == "tool"]
    assert stored["status"] == "error" and tool.inner_text() == f"tool error (task): {stored['content']}"
    assert get_sync_client(url=hitl_gateway.url, api_key=None).threads.get(thread_id)["status"] == "idle"
    assert_clean(tab)


def test_a_reload_while_interrupted_brings_the_inbox_back_from_the_server(
    hitl_tab: Tab, hitl_gateway: SdkServer
) -> None:
    tab = hitl_tab
    tab.send("delegate: water the plants")
    interrupt_id = wait_paused(tab)
    thread_id = tab.thread_id()

    tab.page.reload()  # nothing of the page survives but ?thread= in its URL
    tab.wait_loaded()
    assert tab.thread_id() == thread_id
    assert wait_paused(tab) == interrupt_id
    tab.shot("inbox-after-reload")
    assert_paused_on_task(tab, hitl_gateway, thread_id, interrupt_id, "water the plants")
    assert tab.seen()["created"] == []  # shown from the thread's state: no run was started

    # The decision still goes through from the reloaded page.
    tab.page.click("[data-testid=approve]")
    tab.page.wait_for_selector("main [data-type=tool][data-name=task]", timeout=WAIT_MS)
    tab.wait_idle()
    assert tab.messages()[-1] == ("ai", "Done. task returned: Here is my answer to: water the plants")
    client = get_sync_client(url=hitl_gateway.url, api_key=None)
    assert client.threads.get(thread_id)["status"] == "idle"
    assert sorted(r["status"] for r in client.runs.list(thread_id)) == ["interrupted", "success"]
    assert_clean(tab)


def test_the_page_mounts_a_full_stack_plugin_and_invokes_its_actions(
    browser: Any, notes_gateway: SdkServer, page_origin: str, tmp_path: Path
) -> None:
    with opened_tab(browser, notes_gateway, page_origin, tmp_path) as tab:
        tab.page.wait_for_selector("[data-testid=plugin-nav][data-loaded]", timeout=WAIT_MS)
        assert tab.seen()["plugins"] == ["example.notes"]  # found through GET /api/plugins

        # The agent calls the plugin's tool; the conversation action saves the answer.
        tab.send(f'use {NOTES_TOOL} {{"text": "water the plants"}}')
        tab.page.wait_for_selector(f"main [data-type=tool][data-name={NOTES_TOOL}]", timeout=WAIT_MS)
        tab.wait_idle()
        answer = tab.messages()[-1]
        assert answer[0] == "ai" and answer[1].startswith(f"Done. {NOTES_TOOL} returned:"), answer
        tab.page.click("[data-testid=conversation-action][data-action=save-answer]")
        notice = tab.page.wait_for_selector("[data-testid=plugin-notice]", timeout=WAIT_MS)
        assert notice.inner_text().strip() == "Saved to Notes."

        # The page: the module's own DOM, drawn from its `list` action, then its `add` action.
        tab.page.click(f"[data-testid=plugin-page][data-namespace='{NOTES}'][data-surface=notes]")
        surface = "[data-testid=plugin-surface]"
        tab.page.wait_for_function(f"document.querySelectorAll('{surface} ul.notes li').length === 2", timeout=WAIT_MS)
        assert tab.page.locator(f"{surface} h2").inner_text() == "Team notes"  # the public setting
        notes = tab.page.locator(f"{surface} ul.notes li")
        assert notes.nth(0).inner_text() == answer[1] and notes.nth(0).get_attribute("data-source") == "user"
        assert (notes.nth(1).inner_text(), notes.nth(1).get_attribute("data-source")) == ("water the plants", "agent")
        tab.page.fill(f"{surface} input[name=text]", "from the page")
        tab.page.click(f"{surface} button[type=submit]")
        tab.page.wait_for_function(
            f"document.querySelector('{surface} ul.notes li')?.textContent === 'from the page'", timeout=WAIT_MS
        )
        assert tab.page.locator(f"{surface} [role=status]").inner_text() == "3 of 5"
        # The stylesheet the module loads from its own packaged assets applied.
        assert tab.page.eval_on_selector(f"{surface} .notes-form", "e => getComputedStyle(e).display") == "flex"
        tab.shot("plugin-page")

        seen = tab.seen()
        assert seen["mounted"] == ["example.notes/notes"]
        assert seen["executed"] == ["example.notes/save-answer"]
        assert [(a["action"], a["status"]) for a in seen["actions"]] == [
            ("add", 200),
            ("list", 200),
            ("add", 200),
            ("list", 200),
        ]
        assert_clean(tab)


def listed(tab: Tab) -> list[str]:
    return [str(a.get_attribute("data-thread-id")) for a in tab.page.locator("[data-testid=thread]").all()]


def test_a_page_signed_in_as_a_user_lists_and_opens_only_their_threads(
    browser: Any, auth_gateway: SdkServer, page_origin: str, tmp_path: Path
) -> None:
    alice_token, bob_token = user_token("alice"), user_token("bob")
    with opened_tab(browser, auth_gateway, page_origin, tmp_path, query=f"&token={alice_token}") as alice:
        alice.send("hello from alice")
        alice.wait_idle()
        hers = alice.thread_id()
        alice.page.wait_for_selector(f"[data-testid=thread][data-thread-id='{hers}']", timeout=WAIT_MS)
        assert listed(alice) == [hers]
        assert alice.messages()[-1][1].endswith("hello from alice")
        assert_clean(alice)
    with opened_tab(browser, auth_gateway, page_origin, tmp_path, query=f"&token={bob_token}") as bob:
        assert listed(bob) == []  # the same Gateway, the same database: none of alice's
        bob.send("hello from bob")
        bob.wait_idle()
        his = bob.thread_id()
        bob.page.wait_for_selector(f"[data-testid=thread][data-thread-id='{his}']", timeout=WAIT_MS)
        assert listed(bob) == [his]
        bob.shot("signed-in-as-bob")
        assert_clean(bob)
    owners = {
        thread: get_sync_client(
            url=auth_gateway.url, api_key=None, headers={"Authorization": f"Bearer {bearer}"}
        ).threads.get(thread)["metadata"]["owner"]
        for thread, bearer in ((hers, alice_token), (his, bob_token))
    }
    assert owners == {hers: "alice", his: "bob"}

    # Bob given alice's thread in the address: the Gateway answers 404, the page shows nothing of hers.
    with opened_tab(browser, auth_gateway, page_origin, tmp_path, query=f"&token={bob_token}&thread={hers}") as peek:
        peek.page.wait_for_function("window.__deerflow.errors.length > 0", timeout=WAIT_MS)
        assert peek.messages() == [] and listed(peek) == [his]
        assert all("404" in error for error in peek.console_errors), peek.console_errors
        assert peek.escaped == []
