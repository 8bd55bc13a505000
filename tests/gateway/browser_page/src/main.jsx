// A small chat page on the official JS client, the way a chat UI uses it: `useStream`
// from @langchain/langgraph-sdk/react for the conversation (submit, streamed messages,
// custom events, rejoin after a reload, state history) and the SDK's `Client` for the
// thread list. It is served from another origin than the Gateway, so every request is a
// cross-origin one. `?api=<Gateway>/api` says where the Gateway is; the open thread is kept
// in `?thread=` so that a reload comes back to it; `?token=` is the user's bearer token.
//
// When the thread is paused on an interrupt (`stream.interrupt`), the page shows it as an
// inbox item: for a human-in-the-loop request (LangChain's HumanInTheLoopMiddleware), each
// gated tool call with its arguments and the decisions the request allows; a decision is
// sent back with `stream.submit(undefined, { command: { resume } })`. After a reload the
// inbox comes back from the thread's own state (its tasks' interrupts), not from memory.
//
// The page records what it saw on `window.__deerflow` for the test that drives it
// (tests/gateway/test_browser_client.py): which message ids arrived while a run was
// streaming, the custom events, the runs created, the resumes sent, and any error.
//
// It also mounts the Gateway's full-stack plugins (`GET /api/plugins`): their pages in the
// sidebar and their conversation actions on the open thread (plugins.jsx).
import { useCallback, useEffect, useRef, useState } from "react";
import { createRoot } from "react-dom/client";
import { Client } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";
import { ConversationActions, PluginNav, PluginSurface, usePlugins } from "./plugins.jsx";

const params = new URLSearchParams(window.location.search);
const apiUrl = params.get("api");
// `?token=` signs the page in as one user: every request carries it as a bearer token, as a
// chat UI on a Gateway with `auth` configured sends its user's.
const token = params.get("token");
const authHeaders = token ? { Authorization: `Bearer ${token}` } : {};
const client = new Client({ apiUrl, defaultHeaders: authHeaders });
const seen = (window.__deerflow = {
  streamed: [],
  custom: [],
  created: [],
  errors: [],
  resumed: [],
  finished: 0,
  plugins: null,
  mounted: [],
  actions: [],
  executed: [],
});

// The inbox's look; kept here rather than in index.html so the feature is in one file.
const INBOX_STYLE = `
  .inbox { border: 1px solid #e0a526; background: #fff8e6; border-radius: 8px; padding: 10px 12px; max-width: 70ch; }
  .inbox h4 { margin: 0 0 6px; color: #8a5a00; }
  .inbox .action { margin: 6px 0; }
  .inbox pre { background: #fff; border: 1px solid #eadfc4; border-radius: 6px; padding: 6px 8px; margin: 4px 0; white-space: pre-wrap; }
  .inbox .decide { display: flex; gap: 8px; align-items: center; margin-top: 8px; }
  .inbox .decide input { flex: 1; }
  .inbox button.approve { background: #2e9e5b; color: white; border: 0; border-radius: 6px; padding: 5px 12px; }
  .inbox button.reject { background: #c4372d; color: white; border: 0; border-radius: 6px; padding: 5px 12px; }
  .message.tool.error { background: #fdecea; border-left-color: #c4372d; }
`;

function textOf(message) {
  const content = message.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((b) => (typeof b === "string" ? b : b.text ?? "")).join("");
  return "";
}

function typeOf(message) {
  return message.type ?? message._getType?.() ?? "unknown";
}

function useThreadIdInUrl() {
  const [threadId, setThreadId] = useState(params.get("thread"));
  const onThreadId = useCallback((id) => {
    setThreadId(id);
    const url = new URL(window.location.href);
    if (id) url.searchParams.set("thread", id);
    else url.searchParams.delete("thread");
    window.history.replaceState(null, "", url);
  }, []);
  return [threadId, onThreadId];
}

function ThreadList({ selected, onSelect, refreshKey }) {
  const [threads, setThreads] = useState(null);
  const [failure, setFailure] = useState(null);
  useEffect(() => {
    client.threads
      .search({ limit: 20, sortBy: "updated_at", sortOrder: "desc" })
      .then(setThreads)
      .catch((error) => {
        seen.errors.push(`threads.search: ${error}`);
        setFailure(String(error));
      });
  }, [refreshKey]);
  if (failure != null && threads == null) {
    return (
      <nav data-testid="threads" data-loaded="error">
        Cannot list threads: {failure}
      </nav>
    );
  }
  if (threads == null) return <p>Loading threads…</p>;
  return (
    <nav data-testid="threads" data-loaded="true">
      <h3>Threads</h3>
      {threads.map((thread) => {
        const first = (thread.values?.messages ?? []).find((m) => typeOf(m) === "human");
        const label = thread.values?.title || (first ? textOf(first) : thread.thread_id);
        return (
          <a
            key={thread.thread_id}
            data-testid="thread"
            data-thread-id={thread.thread_id}
            className={thread.thread_id === selected ? "thread selected" : "thread"}
            onClick={() => onSelect(thread.thread_id)}
          >
            {label} <small>({thread.status})</small>
          </a>
        );
      })}
    </nav>
  );
}

function Message({ message }) {
  const type = typeOf(message);
  if (type === "tool") {
    const failed = message.status === "error";
    return (
      <div
        className={failed ? "message tool error" : "message tool"}
        data-testid="message"
        data-type="tool"
        data-name={message.name}
        data-status={failed ? "error" : "success"}
      >
        tool {failed ? "error" : "result"} ({message.name}): {textOf(message)}
      </div>
    );
  }
  const calls = message.tool_calls ?? [];
  return (
    <div className={`message ${type}`} data-testid="message" data-type={type} data-id={message.id}>
      {textOf(message)}
      {calls.map((call) => (
        <div key={call.id} data-testid="tool-call" data-name={call.name}>
          calls {call.name}({JSON.stringify(call.args)})
        </div>
      ))}
    </div>
  );
}

// The gated tool calls of a human-in-the-loop request, or null when the interrupt is of
// another kind (a breakpoint, or a graph's own `interrupt(value)`). The SDK exposes the
// request's fields in both casings; the camelCase ones are its canonical names.
function actionRequestsOf(interrupt) {
  const value = interrupt?.value;
  const requests = value?.actionRequests ?? value?.action_requests;
  return Array.isArray(requests) ? requests : null;
}

function allowedDecisions(interrupt, name) {
  const configs = interrupt.value?.reviewConfigs ?? interrupt.value?.review_configs ?? [];
  const config = configs.find((c) => (c.actionName ?? c.action_name) === name);
  return config?.allowedDecisions ?? config?.allowed_decisions ?? ["approve", "reject"];
}

function InboxItem({ interrupt, busy, onDecide }) {
  const [reason, setReason] = useState("");
  const requests = actionRequestsOf(interrupt);
  if (requests == null) {
    return (
      <section className="inbox" data-testid="inbox-item" data-interrupt-id={interrupt.id ?? ""}>
        <h4>Paused{interrupt.when === "breakpoint" ? " at a breakpoint" : ""}</h4>
        {interrupt.value !== undefined ? <pre>{JSON.stringify(interrupt.value, null, 2)}</pre> : null}
      </section>
    );
  }
  // One decision per gated call, in the request's order: that is what the middleware expects.
  const allowed = new Set(requests.flatMap((r) => allowedDecisions(interrupt, r.name)));
  const decide = (type) =>
    onDecide(
      interrupt,
      requests.map(() => (type === "reject" ? { type, message: reason.trim() || "Rejected by the user" } : { type })),
    );
  return (
    <section className="inbox" data-testid="inbox-item" data-interrupt-id={interrupt.id ?? ""}>
      <h4>Waiting for your approval</h4>
      {requests.map((request, index) => (
        <div key={index} className="action" data-testid="gated-call" data-name={request.name}>
          <div>
            tool <b data-testid="gated-name">{request.name}</b>
          </div>
          <pre data-testid="gated-args">{JSON.stringify(request.args, null, 2)}</pre>
        </div>
      ))}
      <div className="decide">
        {allowed.has("approve") ? (
          <button className="approve" data-testid="approve" disabled={busy} onClick={() => decide("approve")}>
            Approve
          </button>
        ) : null}
        {allowed.has("reject") ? (
          <>
            <input
              data-testid="reject-reason"
              placeholder="Reason for rejecting (optional)"
              value={reason}
              disabled={busy}
              onChange={(e) => setReason(e.target.value)}
            />
            <button className="reject" data-testid="reject" disabled={busy} onClick={() => decide("reject")}>
              Reject
            </button>
          </>
        ) : null}
      </div>
    </section>
  );
}

function App() {
  const [threadId, onThreadId] = useThreadIdInUrl();
  const [refreshKey, setRefreshKey] = useState(0);
  const [draft, setDraft] = useState("");
  const plugins = usePlugins(apiUrl, seen, authHeaders);
  const [openedPlugin, setOpenedPlugin] = useState(null);
  const stream = useStream({
    apiUrl,
    defaultHeaders: authHeaders,
    assistantId: "lead_agent",
    messagesKey: "messages",
    threadId,
    onThreadId,
    reconnectOnMount: true,
    fetchStateHistory: { limit: 50 },
    onCreated: (run) => seen.created.push(run),
    onCustomEvent: (data) => seen.custom.push(data),
    onError: (error) => seen.errors.push(String(error?.message ?? error)),
    onFinish: () => {
      seen.finished += 1;
      setRefreshKey((k) => k + 1);
    },
  });
  const loading = useRef(false);
  loading.current = stream.isLoading;
  useEffect(() => {
    if (!loading.current) return;
    for (const message of stream.messages) {
      const key = `${typeOf(message)}:${textOf(message)}`;
      if (textOf(message) && !seen.streamed.includes(key)) seen.streamed.push(key);
    }
  }, [stream.messages]);

  // `interrupt` is one interrupt, several (an array) or none.
  const pending = stream.interrupt == null ? [] : [stream.interrupt].flat();
  const resume = (interrupt, decisions) => {
    // With several interrupts pending, LangGraph takes the answers keyed by interrupt id.
    const answer = { decisions };
    const command = { resume: pending.length > 1 && interrupt.id ? { [interrupt.id]: answer } : answer };
    seen.resumed.push(command);
    stream.submit(undefined, { command });
  };

  const send = (event) => {
    event.preventDefault();
    const text = draft.trim();
    if (!text) return;
    setDraft("");
    const message = { id: crypto.randomUUID(), type: "human", content: text };
    stream.submit(
      { messages: [message] },
      { optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), message] }) },
    );
  };

  return (
    <>
      <style>{INBOX_STYLE}</style>
      <aside>
        <button data-testid="new-thread" onClick={() => onThreadId(null)}>
          New thread
        </button>
        <ThreadList selected={threadId} onSelect={onThreadId} refreshKey={refreshKey} />
        <PluginNav plugins={plugins} opened={openedPlugin} onOpen={setOpenedPlugin} />
        <h3>History</h3>
        <ol data-testid="history" data-thread-id={threadId ?? ""}>
          {stream.history.map((state) => (
            <li key={state.checkpoint?.checkpoint_id} className="checkpoint" data-testid="checkpoint">
              step {state.metadata?.step} · {(state.values?.messages ?? []).length} messages
            </li>
          ))}
        </ol>
      </aside>
      <main>
        <header>
          thread <code data-testid="thread-id">{threadId ?? "new"}</code> ·{" "}
          <span data-testid="status">{stream.isLoading ? "streaming" : pending.length ? "interrupted" : "idle"}</span>
          {stream.error ? <div data-testid="error">{String(stream.error?.message ?? stream.error)}</div> : null}
        </header>
        <PluginSurface opened={openedPlugin} seen={seen} />
        <ConversationActions plugins={plugins} threadId={threadId} messages={stream.messages} seen={seen} />
        {stream.messages.map((message, index) => (
          <Message key={message.id ?? index} message={message} />
        ))}
        {pending.map((interrupt, index) => (
          <InboxItem key={interrupt.id ?? index} interrupt={interrupt} busy={stream.isLoading} onDecide={resume} />
        ))}
        <form onSubmit={send}>
          <textarea data-testid="input" value={draft} onChange={(e) => setDraft(e.target.value)} rows={2} />
          <button data-testid="send" type="submit" disabled={stream.isLoading}>
            Send
          </button>
        </form>
      </main>
    </>
  );
}

createRoot(document.getElementById("root")).render(<App />);
