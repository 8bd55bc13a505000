// A small chat page on the official JS client, the way a chat UI uses it: `useStream`
// from @langchain/langgraph-sdk/react for the conversation (submit, streamed messages,
// custom events, rejoin after a reload, state history) and the SDK's `Client` for the
// thread list. It is served from another origin than the Gateway, so every request is a
// cross-origin one. `?api=<Gateway>/api` says where the Gateway is; the open thread is kept
// in `?thread=` so that a reload comes back to it.
//
// The page records what it saw on `window.__deerflow` for the test that drives it
// (tests/gateway/test_browser_client.py): which message ids arrived while a run was
// streaming, the custom events, the runs created, and any error.
import { useCallback, useEffect, useRef, useState } from "react";
import { createRoot } from "react-dom/client";
import { Client } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";

const params = new URLSearchParams(window.location.search);
const apiUrl = params.get("api");
const client = new Client({ apiUrl });
const seen = (window.__deerflow = { streamed: [], custom: [], created: [], errors: [], finished: 0 });

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
    return (
      <div className="message tool" data-testid="message" data-type="tool" data-name={message.name}>
        tool result ({message.name}): {textOf(message)}
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

function App() {
  const [threadId, onThreadId] = useThreadIdInUrl();
  const [refreshKey, setRefreshKey] = useState(0);
  const [draft, setDraft] = useState("");
  const stream = useStream({
    apiUrl,
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
      <aside>
        <button data-testid="new-thread" onClick={() => onThreadId(null)}>
          New thread
        </button>
        <ThreadList selected={threadId} onSelect={onThreadId} refreshKey={refreshKey} />
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
          <span data-testid="status">{stream.isLoading ? "streaming" : "idle"}</span>
          {stream.error ? <div data-testid="error">{String(stream.error?.message ?? stream.error)}</div> : null}
        </header>
        {stream.messages.map((message, index) => (
          <Message key={message.id ?? index} message={message} />
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
