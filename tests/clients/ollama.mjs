// Ollama's API through the official `ollama` npm client: the model list and
// show, a chat and a generation streamed and not (the streamed pieces join
// into the whole answer of the same seed, the last line holds the counts),
// a chat held to a JSON schema by `format`, a tool round trip, an unknown
// model's 404 and an unknown option's 400.
//
//   node tests/clients/ollama.mjs BASE_URL API_KEY   (BASE_URL ends in /v1, as for the others)
import { Ollama } from "ollama";
import Ajv from "ajv";
import { check } from "./check.mjs";

const [baseURL, apiKey] = process.argv.slice(2);
const ollama = new Ollama({ host: baseURL.replace(/\/v1$/, ""), headers: { Authorization: `Bearer ${apiKey}` } });

const list = await ollama.list();
check(list.models.length === 1 && list.models[0].details.format === "gguf", "list", JSON.stringify(list));
const model = list.models[0].name;
const show = await ollama.show({ model });
check(typeof show.template === "string" && show.details.format === "gguf", "show", JSON.stringify(show).slice(0, 200));

const messages = [{ role: "user", content: "Tell me a story." }];
const options = { seed: 3, temperature: 0, num_predict: 16 };
const whole = await ollama.chat({ model, messages, options, stream: false });
check(whole.done && whole.message.role === "assistant" && whole.message.content.length > 0 && whole.eval_count === 16 &&
  whole.done_reason === "length", "chat", JSON.stringify(whole));
let joined = "", last = null;
for await (const part of await ollama.chat({ model, messages, options, stream: true })) {
  joined += part.message.content;
  last = part;
}
check(joined === whole.message.content && last.done && last.eval_count === 16 && last.prompt_eval_count > 0,
  "streamed chat joins into the same answer", JSON.stringify([joined, whole.message.content, last]));

const generated = await ollama.generate({ model, prompt: "Once upon a time", options, stream: false });
let streamed = "";
for await (const part of await ollama.generate({ model, prompt: "Once upon a time", options, stream: true })) {
  streamed += part.response;
}
check(generated.done && generated.response.length > 0 && streamed === generated.response, "generate, streamed and not",
  JSON.stringify([generated.response, streamed]));
const raw = await ollama.generate({ model, prompt: "Once upon a time", raw: true, options, stream: false });
check(raw.done && raw.response.length > 0, "generate raw", JSON.stringify(raw));

const schema = { type: "object", properties: { name: { type: "string", maxLength: 10 }, legs: { type: "integer" } },
  required: ["name", "legs"], additionalProperties: false };
const validate = new Ajv().compile(schema);
for (let seed = 1; seed <= 5; seed++) {
  const r = await ollama.chat({ model, messages, format: schema, options: { seed, num_predict: 120 }, stream: false });
  let value = null;
  try { value = JSON.parse(r.message.content); } catch {}
  if (value === null || !validate(value)) check(false, `format schema, seed ${seed}`, r.message.content);
}
check(true, "format: a JSON schema holds, 5 seeds");

// A tool round trip in Ollama's shapes (no ids; the result names its tool).
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather in a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const round = await ollama.chat({ model, tools, options: { seed: 1, num_predict: 8 }, stream: false, messages: [
  ...messages,
  { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris" } } }] },
  { role: "tool", tool_name: "get_weather", content: "22 degrees" }] });
check(round.done && round.prompt_eval_count > whole.prompt_eval_count, "a tool round trip", JSON.stringify(round));

for (const [request, status, what] of [
  [{ model: "llama3:8b", messages }, 404, "404 for an unknown model"],
  [{ model, messages, options: { mirostat: 2 } }, 400, "400 for an option serve lacks"],
]) {
  try {
    await ollama.chat({ ...request, stream: false });
    check(false, what, "no error");
  } catch (e) {
    check(e.status_code === status && typeof e.error === "string" && e.error.length > 0, what, `${e.status_code} ${e.error}`);
  }
}
console.log("all checks passed");
