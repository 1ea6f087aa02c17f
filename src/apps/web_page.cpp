#include "apps/web_page.h"

namespace tessera {

namespace {

constexpr std::string_view kPage = R"tessera-page(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tessera</title>
<style>
  :root { --bg: #f6f6f3; --panel: #fff; --ink: #1d1d1b; --soft: #6b6b66; --line: #deddd6; --accent: #2f5d8a; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: var(--ink); background: var(--bg);
         display: grid; grid-template-columns: 230px 1fr; height: 100vh; }
  aside { border-right: 1px solid var(--line); padding: 12px; overflow-y: auto; background: var(--panel); }
  aside button { width: 100%; margin-bottom: 10px; }
  .conv { padding: 6px 8px; border-radius: 6px; cursor: pointer; white-space: nowrap; overflow: hidden;
          text-overflow: ellipsis; color: var(--soft); }
  .conv.active { background: #e8eef5; color: var(--ink); }
  main { display: grid; grid-template-rows: auto 1fr auto; height: 100vh; min-width: 0; }
  header { padding: 10px 16px; border-bottom: 1px solid var(--line); background: var(--panel); font-size: 13px; }
  header b { font-size: 15px; }
  #plan { color: var(--soft); margin-top: 4px; }
  #plan span { display: inline-block; margin-right: 14px; }
  #messages { overflow-y: auto; padding: 16px; }
  .msg { max-width: 760px; margin: 0 auto 12px; padding: 10px 14px; border-radius: 10px; white-space: pre-wrap;
         word-wrap: break-word; }
  .msg.user { background: #e8eef5; }
  .msg.assistant { background: var(--panel); border: 1px solid var(--line); }
  .msg .role { font-size: 12px; color: var(--soft); margin-bottom: 2px; }
  footer { padding: 10px 16px; border-top: 1px solid var(--line); background: var(--panel); }
  form { display: flex; gap: 8px; max-width: 760px; margin: 0 auto; }
  textarea { flex: 1; resize: none; height: 56px; padding: 8px; font: inherit; border: 1px solid var(--line);
             border-radius: 8px; }
  button { font: inherit; padding: 6px 14px; border-radius: 8px; border: 1px solid var(--accent);
           background: var(--accent); color: #fff; cursor: pointer; }
  button.secondary { background: #fff; color: var(--accent); }
  button:disabled { opacity: .45; cursor: default; }
  #stats { max-width: 760px; margin: 6px auto 0; font-size: 12px; color: var(--soft); display: flex; gap: 12px; }
  .tool { margin-top: 6px; padding: 6px 8px; border-radius: 6px; background: #f1efe6; font: 13px ui-monospace, monospace;
          white-space: pre-wrap; }
  #options { max-width: 760px; margin: 6px auto 0; font-size: 12px; color: var(--soft); }
  #tools { width: 100%; height: 70px; font: 12px ui-monospace, monospace; margin-top: 4px; }
  #key { width: 150px; font: inherit; font-size: 12px; padding: 2px 6px; border: 1px solid var(--line);
         border-radius: 6px; }
</style>
</head>
<body>
<aside>
  <button id="new" class="secondary">New chat</button>
  <div id="conversations"></div>
</aside>
<main>
  <header>
    <b id="model">Tessera</b> <span id="ctx"></span>
    <div id="plan"></div>
  </header>
  <div id="messages"></div>
  <footer>
    <form id="form">
      <textarea id="input" placeholder="Message (Enter sends, Shift+Enter: new line)"></textarea>
      <button id="send" type="submit">Send</button>
      <button id="stop" type="button" class="secondary" disabled>Stop</button>
    </form>
    <div id="stats"><span id="speed"></span><span>API key <input id="key" type="password" autocomplete="off"></span>
      <label><input id="json" type="checkbox"> JSON mode</label></div>
    <details id="options"><summary>Tools</summary>
      <textarea id="tools" placeholder='OpenAI tools, e.g. [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]'></textarea>
      <label>tool choice <select id="tool-choice"><option>auto</option><option>required</option><option>none</option></select></label>
    </details>
  </footer>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const store = {
  load() { try { return JSON.parse(localStorage.getItem("tessera.conversations")) || []; } catch { return []; } },
  save(list) { localStorage.setItem("tessera.conversations", JSON.stringify(list)); },
};
let conversations = store.load();
let current = conversations.length ? conversations[0].id : null;
let controller = null;
$("key").value = localStorage.getItem("tessera.key") || "";
$("key").addEventListener("change", () => localStorage.setItem("tessera.key", $("key").value));
const headers = () => {
  const h = { "Content-Type": "application/json" };
  if ($("key").value) h.Authorization = "Bearer " + $("key").value;
  return h;
};
const conversation = () => conversations.find((c) => c.id === current);

function render() {
  const list = $("conversations");
  list.textContent = "";
  for (const c of conversations) {
    const div = document.createElement("div");
    div.className = "conv" + (c.id === current ? " active" : "");
    div.textContent = c.title || "New chat";
    div.onclick = () => { if (!controller) { current = c.id; render(); } };
    list.appendChild(div);
  }
  const box = $("messages");
  box.textContent = "";
  for (const m of conversation()?.messages || []) box.appendChild(bubble(m.role, m.content, m.tool_calls));
  box.scrollTop = box.scrollHeight;
}
function showCalls(div, calls) {
  for (const call of calls || []) {
    const t = document.createElement("div");
    t.className = "tool";
    t.textContent = `tool call ${call.function.name}(${call.function.arguments})`;
    div.appendChild(t);
  }
}
function bubble(role, text, calls) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const who = document.createElement("div");
  who.className = "role";
  who.textContent = role;
  const body = document.createElement("div");
  body.className = "text";
  body.textContent = text;
  div.append(who, body);
  showCalls(div, calls);
  return div;
}
function newChat() {
  const c = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 6), title: "", messages: [] };
  conversations.unshift(c);
  current = c.id;
  store.save(conversations);
  render();
}
async function props() {
  try {
    const p = await (await fetch("/props", { headers: headers() })).json();
    $("model").textContent = p.model;
    $("ctx").textContent = `context ${p.n_ctx} tokens`;
    $("plan").textContent = "";
    for (const n of p.plan) {
      const s = document.createElement("span");
      s.textContent = `${n.role} ${n.address}: ${n.slice}`;
      $("plan").appendChild(s);
    }
  } catch (e) { $("plan").textContent = "plan unavailable: " + e; }
}
// The request of a turn: JSON mode and the tools the page holds.
function request(messages) {
  const r = { messages, stream: true, stream_options: { include_usage: true } };
  if ($("json").checked) r.response_format = { type: "json_object" };
  const tools = $("tools").value.trim();
  if (tools) {
    r.tools = JSON.parse(tools);
    r.tool_choice = $("tool-choice").value;
  }
  return r;
}
async function send(text) {
  if (!conversation()) newChat();
  const c = conversation();
  c.messages.push({ role: "user", content: text });
  if (!c.title) c.title = text.slice(0, 40);
  const answer = { role: "assistant", content: "" };
  c.messages.push(answer);
  store.save(conversations);
  render();
  const target = $("messages").lastChild.querySelector(".text");
  controller = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  const start = performance.now();
  let first = 0, pieces = 0, usage = null;
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), signal: controller.signal,
      body: JSON.stringify(request(c.messages.slice(0, -1))),
    });
    if (!res.ok) throw new Error((await res.json()).error?.message || res.statusText);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let at;
      while ((at = buffer.indexOf("\n\n")) >= 0) {
        const line = buffer.slice(0, at).trim();
        buffer = buffer.slice(at + 2);
        if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
        const chunk = JSON.parse(line.slice(6));
        if (chunk.usage) usage = chunk.usage;
        if (chunk.error) throw new Error(chunk.error.message);
        for (const choice of chunk.choices || []) {
          for (const d of choice.delta?.tool_calls || []) {
            answer.tool_calls ??= [];
            answer.tool_calls[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
            const call = answer.tool_calls[d.index];
            if (d.id) call.id = d.id;
            if (d.function?.name) call.function.name += d.function.name;
            if (d.function?.arguments) call.function.arguments += d.function.arguments;
          }
          if (choice.finish_reason === "tool_calls") showCalls(target.parentNode, answer.tool_calls);
          const piece = choice.delta?.content || "";
          if (!piece) continue;
          if (!first) first = performance.now();
          pieces++;
          answer.content += piece;
          target.textContent = answer.content;
          $("messages").scrollTop = $("messages").scrollHeight;
        }
      }
    }
  } catch (e) {
    if (e.name !== "AbortError") answer.content += (answer.content ? "\n" : "") + "[error: " + e.message + "]";
    target.textContent = answer.content;
  }
  const seconds = ((performance.now() - (first || start)) / 1000) || 1e-9;
  const tokens = usage ? usage.completion_tokens : pieces;
  $("speed").textContent = `${tokens} tokens, ${(tokens / seconds).toFixed(1)} tok/s` +
    (first ? `, first token after ${((first - start) / 1000).toFixed(2)} s` : "") +
    (controller.signal.aborted ? " (stopped)" : "");
  controller = null;
  $("send").disabled = false;
  $("stop").disabled = true;
  store.save(conversations);
}
$("new").onclick = () => { if (!controller) newChat(); };
$("stop").onclick = () => controller?.abort();
$("form").onsubmit = (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  send(text);
};
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); }
});
render();
props();
</script>
</body>
</html>
)tessera-page";

}  // namespace

std::string_view web_page() { return kPage; }

}  // namespace tessera
