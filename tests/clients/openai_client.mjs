// The official OpenAI client against `tessera serve` (tests/apps/test_serve_cli.cpp
// starts the server): models list, chat with and without streaming (the
// streamed text equals the whole answer), completions, logit_bias, a 401 for a wrong key,
// 400s for a malformed request and a prompt longer than the context, and an
// abort mid-stream after which the server answers the next request at once.
//
//   node tests/clients/openai_client.mjs BASE_URL API_KEY
// Prints one line per check; exits 1 at the first failure.
import OpenAI from "openai";
import { check } from "./check.mjs";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const greedy = { temperature: 0, max_tokens: 16 };
const messages = [{ role: "user", content: "Once upon a time" }];

const models = await client.models.list();
check(models.data.length === 1 && typeof models.data[0].id === "string", "models list", JSON.stringify(models.data));
const model = models.data[0].id;

const whole = await client.chat.completions.create({ model, messages, ...greedy });
const answer = whole.choices[0].message.content;
check(answer.length > 0 && whole.usage.completion_tokens === 16 && whole.choices[0].finish_reason === "length",
  "chat completion", JSON.stringify(whole));

// logit_bias: +100 on one token forces it at every step.
const forced = (await (await fetch(`${baseURL.replace(/\/v1$/, "")}/tokenize`, { method: "POST",
  headers: { Authorization: `Bearer ${apiKey}` }, body: JSON.stringify({ content: " dog" }) })).json()).tokens.at(-1);
const biased = await client.completions.create({ model, prompt: "Once", temperature: 0, max_tokens: 3,
  logit_bias: { [forced]: 100 } });
const piece = (await (await fetch(`${baseURL.replace(/\/v1$/, "")}/detokenize`, { method: "POST",
  headers: { Authorization: `Bearer ${apiKey}` }, body: JSON.stringify({ tokens: [forced] }) })).json()).content;
check(biased.choices[0].text === piece.repeat(3), "logit_bias forces a token", JSON.stringify([biased.choices[0].text, piece]));

let streamed = "", usage = null, chunks = 0;
const stream = await client.chat.completions.create({ model, messages, ...greedy, stream: true,
  stream_options: { include_usage: true } });
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) streamed += c.delta?.content ?? "";
}
check(streamed === answer, "streamed chat equals the whole answer", JSON.stringify({ streamed, answer }));
check(usage && usage.completion_tokens === 16 && chunks > 2, "stream usage", JSON.stringify(usage));

// Log-probabilities: one entry per generated token, the greedy choice the
// most likely of its alternatives, streamed entries the same as whole ones.
const withLogprobs = await client.chat.completions.create({ model, messages, ...greedy, logprobs: true,
  top_logprobs: 3 });
const entries = withLogprobs.choices[0].logprobs?.content ?? [];
check(entries.length === 16 && entries.every((e) => e.top_logprobs.length === 3 && e.logprob <= 0 &&
  Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6), "logprobs", JSON.stringify(entries.slice(0, 2)));
let streamedEntries = [];
for await (const chunk of await client.chat.completions.create({ model, messages, ...greedy, logprobs: true,
  top_logprobs: 3, stream: true })) {
  for (const c of chunk.choices) streamedEntries = streamedEntries.concat(c.logprobs?.content ?? []);
}
check(streamedEntries.length === entries.length &&
  streamedEntries.every((e, i) => e.token === entries[i].token && Math.abs(e.logprob - entries[i].logprob) < 1e-6),
  "streamed logprobs", `${streamedEntries.length} entries`);

const text = await client.completions.create({ model, prompt: "The little dog", ...greedy });
check(text.choices[0].text.length > 0 && text.usage.prompt_tokens > 0, "completion", JSON.stringify(text));

const stopString = answer.slice(3, 6);
const stopped = await client.chat.completions.create({ model, messages, ...greedy, stop: [stopString] });
check(stopped.choices[0].message.content === answer.slice(0, answer.indexOf(stopString)) &&
  stopped.choices[0].finish_reason === "stop", "stop string", JSON.stringify(stopped.choices[0]));

try {
  await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list();
  check(false, "401 for a wrong key", "no error");
} catch (e) {
  check(e.status === 401 && e.error?.type === "authentication_error", "401 for a wrong key", `${e.status} ${e.message}`);
}
try {
  await client.chat.completions.create({ model, messages: [] });
  check(false, "400 for no messages", "no error");
} catch (e) {
  check(e.status === 400 && e.error?.param === "messages", "400 for no messages", `${e.status} ${e.message}`);
}
try {
  await client.completions.create({ model, prompt: "once upon a time ".repeat(400), max_tokens: 4 });
  check(false, "400 for a prompt longer than the context", "no error");
} catch (e) {
  check(e.status === 400 && /context holds/.test(e.message), "400 for a prompt longer than the context",
    `${e.status} ${e.message}`);
}
// Nothing is silently ignored: an unknown model is OpenAI's 404, a field the
// server does not implement a 400 naming it; an ignored field is accepted.
const refused = async (request, what, ok) => {
  try {
    await client.chat.completions.create({ model, messages, ...greedy, ...request });
    check(false, what, "no error");
  } catch (e) {
    check(ok(e), what, `${e.status} ${e.code} ${e.param} ${e.message}`);
  }
};
await refused({ model: "gpt-4o" }, "404 for an unknown model",
  (e) => e.status === 404 && e.code === "model_not_found" && e.param === "model");
await refused({ frobnicate: true }, "400 naming an unknown field", (e) => e.status === 400 && e.param === "frobnicate");
await refused({ tools: [{ type: "function", function: { name: "f", parameters: {} } }],
  tool_choice: { type: "function", function: { name: "g" } } }, "400 for a tool_choice naming no tool",
  (e) => e.status === 400 && e.param === "tool_choice");
const stem = model.replace(/\.gguf$/, "");
const byStem = await client.chat.completions.create({ model: stem, messages, ...greedy, user: "u-1" });
check(byStem.choices[0].message.content === answer, "the model's name without .gguf, and an ignored field", stem);

// Abort a long stream after a few chunks: the server stops generating (the
// next request is answered at once, not after the whole long answer).
const controller = new AbortController();
const long = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 100000, stream: true },
  { signal: controller.signal });
let seen = 0, aborted = false;
try {
  for await (const chunk of long) {
    if (++seen === 3) controller.abort();
  }
} catch (e) {
  aborted = e.name === "APIUserAbortError" || e.name === "AbortError";
}
check(aborted || controller.signal.aborted, "abort mid-stream", `${seen} chunks`);
const start = Date.now();
const after = await client.chat.completions.create({ model, messages, ...greedy });
const seconds = (Date.now() - start) / 1000;
check(after.choices[0].message.content === answer && seconds < 30, "next request after an abort",
  `${seconds} s, ${after.choices[0].message.content}`);
// The server counts every generated token: the aborted answer stopped within
// a few tokens of the abort (a full one would be ~1000 at this context).
const metrics = await (await fetch(baseURL.replace(/\/v1$/, "") + "/metrics",
  { headers: { Authorization: `Bearer ${apiKey}` } })).text();
const generated = Number(/tessera_generated_tokens_total (\d+)/.exec(metrics)?.[1]);
check(generated > 16 * 5 - 16 && generated < 200, "the aborted answer stopped at the server", `${generated} tokens`);
console.log("all checks passed");
