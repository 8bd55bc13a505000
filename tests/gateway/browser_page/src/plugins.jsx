// Full-stack plugins on the page, the way DeerFlow's UI finds and mounts them: the page asks
// the Gateway for `GET <api>/plugins`, imports the browser module of each enabled plugin
// from the card's `entry` (a URL on the Gateway: packaged assets or an inline module; a plain
// `import()`, nothing bundled), lists each module's page surfaces in the sidebar and mounts
// one with `surface.mount(root, context)` when it is opened, and offers the module's
// conversation actions on the open thread. A module reaches its backend through
// `context.callBackend(action, payload)`: `POST <api>/plugins/<namespace>/actions/<action>`.
//
// What happened is recorded on `window.__deerflow` for the test: the namespaces listed
// (`plugins`), the surfaces mounted (`mounted`), every action call with its status
// (`actions`) and the conversation actions run (`executed`).
import { useEffect, useRef, useState } from "react";

function backend(apiUrl, seen, namespace, headers) {
  return async (action, payload) => {
    const url = `${apiUrl}/plugins/${encodeURIComponent(namespace)}/actions/${encodeURIComponent(action)}`;
    const response = await fetch(url, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify(payload ?? {}),
    });
    const body = await response.json().catch(() => null);
    seen.actions.push({ namespace, action, status: response.status });
    if (!response.ok) throw new Error(body?.detail ?? `HTTP ${response.status}`);
    return body;
  };
}

// [{card, module, callBackend}] once listed and imported (module null when the plugin is
// disabled or has no browser part); null while loading.
export function usePlugins(apiUrl, seen, headers) {
  const [plugins, setPlugins] = useState(null);
  useEffect(() => {
    let cancelled = false;
    (async () => {
      const response = await fetch(`${apiUrl}/plugins`, { headers });
      if (!response.ok) throw new Error(`GET /plugins answered ${response.status}`);
      const cards = await response.json();
      seen.plugins = cards.map((card) => card.namespace);
      return Promise.all(
        cards.map(async (card) => {
          const callBackend = backend(apiUrl, seen, card.namespace, headers);
          if (!card.entry || card.settings?.enabled !== true) return { card, module: null, callBackend };
          const imported = await import(new URL(card.entry, apiUrl).href);
          return { card, module: imported.default, callBackend };
        }),
      );
    })()
      .then((loaded) => !cancelled && setPlugins(loaded))
      .catch((error) => {
        seen.errors.push(`plugins: ${error}`);
        if (!cancelled) setPlugins([]);
      });
    return () => {
      cancelled = true;
    };
  }, [apiUrl]);
  return plugins;
}

export function PluginNav({ plugins, opened, onOpen }) {
  if (plugins == null) return <p>Loading plugins…</p>;
  const pages = plugins.flatMap((plugin) =>
    (plugin.module?.surfaces ?? []).filter((s) => s.slot === "page").map((surface) => ({ plugin, surface })),
  );
  return (
    <nav data-testid="plugin-nav" data-loaded="true">
      <h3>Plugins</h3>
      {pages.map(({ plugin, surface }) => (
        <a
          key={`${plugin.card.namespace}/${surface.id}`}
          data-testid="plugin-page"
          data-namespace={plugin.card.namespace}
          data-surface={surface.id}
          className={opened?.surface === surface ? "thread selected" : "thread"}
          onClick={() => onOpen(opened?.surface === surface ? null : { plugin, surface })}
        >
          {surface.navigation?.label ?? surface.title}
        </a>
      ))}
    </nav>
  );
}

export function PluginSurface({ opened, seen }) {
  const root = useRef(null);
  useEffect(() => {
    if (!opened) return undefined;
    const { plugin, surface } = opened;
    const controller = new AbortController();
    let handle = null;
    try {
      handle = surface.mount(root.current, {
        locale: navigator.language || "en",
        signal: controller.signal,
        settings: plugin.card.settings,
        callBackend: plugin.callBackend,
      });
      seen.mounted.push(`${plugin.card.namespace}/${surface.id}`);
    } catch (error) {
      seen.errors.push(`mount ${surface.id}: ${error}`);
    }
    return () => {
      controller.abort();
      handle?.dispose?.();
    };
  }, [opened]);
  if (!opened) return null;
  return (
    <section
      className="plugin-page"
      data-testid="plugin-surface"
      data-namespace={opened.plugin.card.namespace}
      data-surface={opened.surface.id}
    >
      <div ref={root} />
    </section>
  );
}

function textOf(message) {
  const content = message.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((b) => (typeof b === "string" ? b : b.text ?? "")).join("");
  return "";
}

// Each enabled plugin's conversation actions, on the open thread.
export function ConversationActions({ plugins, threadId, messages, seen }) {
  const [notice, setNotice] = useState("");
  if (!plugins || !threadId) return null;
  const groups = plugins.flatMap((plugin) => {
    const declared = plugin.module?.conversationActions;
    if (!declared) return [];
    const group = typeof declared === "function" ? declared((key) => key, navigator.language || "en") : declared;
    const actions = (group?.actions ?? []).filter((a) => !a.available || a.available(plugin.card.settings));
    return actions.length ? [{ plugin, group, actions }] : [];
  });
  if (!groups.length) return null;
  const services = (plugin) => ({
    callBackend: plugin.callBackend,
    showMessage: setNotice,
    async latestVisibleAnswer() {
      const answer = [...messages].reverse().find((m) => (m.type ?? m._getType?.()) === "ai" && textOf(m));
      return answer ? { id: answer.id, text: textOf(answer) } : null;
    },
  });
  const run = async (plugin, action) => {
    try {
      await action.execute({ thread: { thread_id: threadId } }, services(plugin));
      seen.executed.push(`${plugin.card.namespace}/${action.id}`);
    } catch (error) {
      seen.errors.push(`conversation action ${action.id}: ${error}`);
    }
  };
  return (
    <div data-testid="conversation-actions">
      {groups.map(({ plugin, group, actions }) => (
        <span key={plugin.card.namespace}>
          {group.label}:{" "}
          {actions.map((action) => (
            <button
              key={action.id}
              data-testid="conversation-action"
              data-namespace={plugin.card.namespace}
              data-action={action.id}
              onClick={() => void run(plugin, action)}
            >
              {action.label}
            </button>
          ))}
        </span>
      ))}
      {notice ? <span data-testid="plugin-notice"> {notice}</span> : null}
    </div>
  );
}
