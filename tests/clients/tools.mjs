// Tool calls through the official OpenAI client on a random-weight model:
// tool_choice "required" and a named function give calls whose arguments
// validate (ajv) against the function's schema, 10 seeds each; streamed,
// the delta.tool_calls chunks join into the same kind of call; the full
// round trip (the call, a tool message, an answer) is answered; "none" gives
// text; a list of thousands of functions is a quick 400.
//
//   node tests/clients/tools.mjs BASE_URL API_KEY [quick|minimal]   (quick: 3 seeds where 10, minimal: 1)
import OpenAI from "openai";
import Ajv from "ajv";
import { check } from "./check.mjs";

const [baseURL, apiKey, quick] = process.argv.slice(2);
const seeds = { quick: 3, minimal: 1 }[quick] ?? 10;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;
const messages = [{ role: "user", content: "What is the weather in Paris, and what is 2 + 3?" }];
const weather = {
  type: "object",
  properties: { city: { type: "string", maxLength: 20 }, unit: { type: "string", enum: ["celsius", "fahrenheit"] },
    days: { type: "integer" } },
  required: ["city", "unit"], additionalProperties: false,
};
const add = {
  type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"],
  additionalProperties: false,
};
const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather in a city.", parameters: weather } },
  { type: "function", function: { name: "add", description: "Adds two numbers.", parameters: add } },
];
const ajv = new Ajv({ strict: false });
const validators = { get_weather: ajv.compile(weather), add: ajv.compile(add) };
const validCall = (call) => call.type === "function" && /^[A-Za-z0-9]{9}$/.test(call.id) &&
  validators[call.function.name]?.(JSON.parse(call.function.arguments));

for (let seed = 1; seed <= seeds; seed++) {
  const r = await client.chat.completions.create({ model, messages, tools, tool_choice: "required", seed,
    max_tokens: 200, temperature: 1 });
  const calls = r.choices[0].message.tool_calls ?? [];
  if (r.choices[0].finish_reason !== "tool_calls" || calls.length === 0 || !calls.every(validCall)) {
    check(false, `required call, seed ${seed}`, JSON.stringify(r.choices[0]));
  }
}
check(true, `tool_choice required: ${seeds} seeds of calls whose arguments validate`);

for (let seed = 1; seed <= seeds; seed++) {
  const r = await client.chat.completions.create({ model, messages, tools, seed, max_tokens: 200,
    tool_choice: { type: "function", function: { name: "add" } }, parallel_tool_calls: false });
  const calls = r.choices[0].message.tool_calls ?? [];
  if (calls.length !== 1 || calls[0].function.name !== "add" || !validCall(calls[0])) {
    check(false, `named call, seed ${seed}`, JSON.stringify(r.choices[0]));
  }
}
check(true, `a named function, one call: ${seeds} seeds`);

// Streamed: the chunks join into calls, as the client's helpers join them.
const streamed = [];
for await (const chunk of await client.chat.completions.create({ model, messages, tools, tool_choice: "required",
  seed: 4, max_tokens: 200, stream: true })) {
  for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
    streamed[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
    if (d.id) streamed[d.index].id = d.id;
    if (d.function?.name) streamed[d.index].function.name += d.function.name;
    if (d.function?.arguments) streamed[d.index].function.arguments += d.function.arguments;
  }
}
check(streamed.length > 0 && streamed.every(validCall), "streamed delta.tool_calls join into valid calls",
  JSON.stringify(streamed));

// The round trip: the call, its result, and an answer.
const first = await client.chat.completions.create({ model, messages, tools, tool_choice: "required", seed: 2,
  max_tokens: 200 });
const assistant = first.choices[0].message;
const results = assistant.tool_calls.map((c) => ({ role: "tool", tool_call_id: c.id, content: "22 degrees" }));
const answer = await client.chat.completions.create({ model, tools, max_tokens: 20, seed: 2,
  messages: [...messages, assistant, ...results] });
check(answer.choices[0].message.role === "assistant" && typeof answer.usage.prompt_tokens === "number" &&
  answer.usage.prompt_tokens > first.usage.prompt_tokens, "a round trip: call, tool result, answer",
  JSON.stringify(answer.choices[0]));

const none = await client.chat.completions.create({ model, messages, tools, tool_choice: "none", max_tokens: 10 });
check(!none.choices[0].message.tool_calls && none.choices[0].finish_reason !== "tool_calls", "tool_choice none: text",
  JSON.stringify(none.choices[0]));

const thousands = [...Array(3000).keys()].map((i) => ({ type: "function", function: { name: `f${i}` } }));
const started = Date.now();
let status = 0, param = "";
try {
  await client.chat.completions.create({ model, messages, tools: thousands, tool_choice: "required", max_tokens: 5 });
} catch (e) {
  status = e.status;
  param = e.param;
}
check(status === 400 && param === "tools" && Date.now() - started < 5000, "400 for 3000 functions", `${status} ${param}`);
console.log("all checks passed");
