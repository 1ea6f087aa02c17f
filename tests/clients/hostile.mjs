// Hostile clients against `tessera serve` (started with --timeout-ms 1000):
// one that connects and says nothing and one that trickles a request a byte
// at a time (on the OpenAI, Ollama and Anthropic endpoints) are dropped
// within seconds while others are served; wrong types and out-of-range
// values on every endpoint are 400s naming the field, in each API's error
// shape.
//
//   node tests/clients/hostile.mjs BASE_URL API_KEY
import net from "node:net";
import { check } from "./check.mjs";

const [baseURL, apiKey] = process.argv.slice(2);
const url = new URL(baseURL);
const headers = { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" };
const closedWithin = (socket, ms) => new Promise((resolve) => {
  const timer = setTimeout(() => resolve(false), ms);
  socket.on("close", () => { clearTimeout(timer); resolve(true); });
  socket.on("error", () => {});
});

const silent = net.connect(Number(url.port), url.hostname);
// A trickling request on each API's endpoint: OpenAI's, Ollama's, Anthropic's.
const trickles = ["/v1/chat/completions", "/api/chat", "/v1/messages"].map((path) => {
  const socket = net.connect(Number(url.port), url.hostname);
  return { socket, request: `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n`, at: 0 };
});
const drip = setInterval(() => {
  for (const t of trickles) if (t.at < t.request.length && !t.socket.destroyed) t.socket.write(t.request[t.at++]);
}, 1500);
const silentClosed = closedWithin(silent, 15000);
const trickleClosed = Promise.all(trickles.map((t) => closedWithin(t.socket, 15000))).then((all) => all.every(Boolean));

const ok = await fetch(`${baseURL}/v1/chat/completions`, { method: "POST", headers,
  body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }) });
check(ok.status === 200, "served beside a silent and a trickling client", ok.status);
check(await silentClosed, "a silent connection is dropped");
check(await trickleClosed, "trickling requests to /v1/chat/completions, /api/chat and /v1/messages are dropped");
clearInterval(drip);

const bad = async (path, body, param) => {
  const res = await fetch(`${baseURL}${path}`, { method: "POST", headers, body });
  const json = await res.json();
  check(res.status === 400 && json.error?.type === "invalid_request_error" &&
    (param === undefined || json.error.param === param), `400 for ${path} ${body.slice(0, 60)}`,
    `${res.status} ${JSON.stringify(json)}`);
};
const chat = (extra) => JSON.stringify({ messages: [{ role: "user", content: "Hi" }], ...extra });
await bad("/v1/chat/completions", "[1, 2]");
await bad("/v1/chat/completions", JSON.stringify({ messages: "hello" }), "messages");
await bad("/v1/chat/completions", JSON.stringify({ messages: [{ role: 5, content: "x" }] }), "messages");
await bad("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: [{ type: "image_url" }] }] }),
  "messages");
await bad("/v1/chat/completions", chat({ max_tokens: -3 }), "max_tokens");
await bad("/v1/chat/completions", chat({ max_tokens: 1e12 }), "max_tokens");
await bad("/v1/chat/completions", chat({ temperature: "hot" }), "temperature");
await bad("/v1/chat/completions", chat({ temperature: 9 }), "temperature");
await bad("/v1/chat/completions", chat({ top_logprobs: 50, logprobs: true }), "top_logprobs");
await bad("/v1/chat/completions", chat({ stop: [1, 2] }), "stop");
await bad("/v1/chat/completions", chat({ stop: ["a", "b", "c", "d", "e"] }), "stop");
await bad("/v1/chat/completions", chat({ n: 3 }), "n");
await bad("/v1/chat/completions", chat({ seed: "x" }), "seed");
await bad("/v1/chat/completions", chat({ stream: "yes" }), "stream");
await bad("/v1/chat/completions", chat({ logit_bias: [1, 2] }), "logit_bias");
await bad("/v1/chat/completions", chat({ logit_bias: { x: 1 } }), "logit_bias");
await bad("/v1/chat/completions", chat({ logit_bias: { "-5": 1 } }), "logit_bias");
await bad("/v1/chat/completions", chat({ logit_bias: { 5: 500 } }), "logit_bias");
await bad("/v1/chat/completions", chat({ logit_bias: { 99999999: 1 } }), "logit_bias");
await bad("/v1/completions", JSON.stringify({ prompt: 5 }), "prompt");
await bad("/v1/completions", JSON.stringify({ prompt: "x", logprobs: 9 }), "logprobs");
await bad("/tokenize", JSON.stringify({ content: 5 }), "content");
await bad("/tokenize", "not json", "content");
await bad("/detokenize", JSON.stringify({ tokens: [1, 99999999] }), "tokens");
await bad("/detokenize", JSON.stringify({ tokens: "1 2" }), "tokens");
await bad("/detokenize", JSON.stringify({ tokens: [4294967297] }), "tokens");  // 2^32 + 1: not token 1
const tok = await (await fetch(`${baseURL}/tokenize`, { method: "POST", headers,
  body: JSON.stringify({ content: "Hello there" }) })).json();
const detok = await (await fetch(`${baseURL}/detokenize`, { method: "POST", headers,
  body: JSON.stringify({ tokens: tok.tokens }) })).json();
check(tok.tokens.length > 0 && detok.content === "Hello there", "tokenize and detokenize round trip",
  JSON.stringify([tok, detok]));
// Ollama's and Anthropic's endpoints answer bad input in their own error shapes.
const other = async (path, body, ok, what) => {
  const res = await fetch(`${baseURL}${path}`, { method: "POST", headers, body });
  const json = await res.json();
  check(res.status === 400 && ok(json), what, `${res.status} ${JSON.stringify(json)}`);
};
await other("/api/chat", "{oops", (j) => typeof j.error === "string", "Ollama: 400 for broken JSON");
await other("/api/chat", JSON.stringify({ messages: [{ role: "user", content: "x" }], options: { num_predict: "ten" } }),
  (j) => /max_tokens/.test(j.error), "Ollama: 400 for a mistyped option");
await other("/api/generate", JSON.stringify({ prompt: ["x"] }), (j) => /prompt/.test(j.error), "Ollama: 400 for a mistyped prompt");
await other("/v1/messages", JSON.stringify({ messages: [{ role: "user", content: "x" }] }),
  (j) => j.type === "error" && j.error.type === "invalid_request_error" && /max_tokens/.test(j.error.message),
  "Anthropic: 400 without max_tokens");
await other("/v1/messages", JSON.stringify({ max_tokens: -1, messages: [{ role: "user", content: "x" }] }),
  (j) => j.type === "error" && /max_tokens/.test(j.error.message), "Anthropic: 400 for max_tokens out of range");
console.log("all checks passed");
