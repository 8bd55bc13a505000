// The Notes page and its conversation action: a plain ES module, served by the host from the
// package's static/ directory (ui_manifest.json lists it); no framework, no build step.
// The host calls mount(root, context) with context.callBackend(action, payload) (a POST to
// /api/plugins/example.notes/actions/<action>), context.settings (the public fields) and
// context.signal (aborted when the page goes away).

const STYLE = new URL("./notes.css", import.meta.url).href;

function element(tag, text, attributes = {}) {
  const node = document.createElement(tag);
  if (text) node.textContent = text;
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  return node;
}

function mountNotes(root, context) {
  const sheet = element("link", "", { rel: "stylesheet", href: STYLE });
  const heading = element("h2", context.settings?.heading || "Notes");
  const form = element("form", "", { class: "notes-form" });
  const input = element("input", "", { name: "text", "aria-label": "New note", maxlength: "2000" });
  const save = element("button", "Add", { type: "submit" });
  const clear = element("button", "Clear", { type: "button" });
  const status = element("p", "", { role: "status" });
  const list = element("ul", "", { class: "notes" });
  form.append(input, save, clear);
  root.append(sheet, heading, form, status, list);
  let disposed = false;
  const live = () => !disposed && !context.signal?.aborted;

  async function load() {
    const answer = await context.callBackend("list", {});
    if (!live()) return;
    heading.textContent = answer.heading;
    list.replaceChildren(
      ...answer.notes.map((note) => element("li", note.text, { "data-source": note.source })),
    );
    status.textContent = `${answer.notes.length} of ${answer.limit}`;
  }

  async function guarded(operation) {
    try {
      await operation();
    } catch {
      if (live()) status.textContent = "Could not complete the action. Please retry.";
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value;
    void guarded(async () => {
      await context.callBackend("add", { text });
      input.value = "";
      await load();
    });
  }, { signal: context.signal });
  clear.addEventListener("click", () => void guarded(async () => {
    await context.callBackend("clear", {});
    await load();
  }), { signal: context.signal });
  const ready = guarded(load);
  return {
    ready,
    dispose() {
      disposed = true;
      root.replaceChildren();
    },
  };
}

export default {
  apiVersion: 1,
  module: "example-notes.v1",
  surfaces: [
    {
      id: "notes",
      slot: "page",
      title: "Notes",
      navigation: { label: "Notes" },
      mount: mountNotes,
    },
  ],
  conversationActions() {
    return {
      label: "Notes",
      actions: [
        {
          id: "save-answer",
          label: "Save last answer",
          available: (settings) => settings.enabled === true,
          async execute(context, services) {
            const answer = await services.latestVisibleAnswer(context);
            if (!answer) {
              services.showMessage("No answer to save yet.");
              return;
            }
            await services.callBackend("add", {
              text: answer.text.slice(0, 2000),
              thread_id: context.thread.thread_id,
            });
            services.showMessage("Saved to Notes.");
          },
        },
      ],
    };
  },
};
