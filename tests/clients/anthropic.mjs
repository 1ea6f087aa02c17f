// Anthropic's Messages API through the official @anthropic-ai/sdk client: a
// message streamed and not (the stream's final message equals the whole
// answer of the same seedless greedy request), tool use with tool_choice
// "any" whose input validates (ajv) against the input_schema, streamed tool
// use assembled by the SDK, a tool_result round trip, and an unknown
// model's 404.
//
//   node tests/clients/anthropic.mjs BASE_URL API_KEY   (BASE_URL ends in /v1, as for the others)
import Anthropic from "@anthropic-ai/sdk";
import Ajv from "ajv";
import { check } from "./check.mjs";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL: baseURL.replace(/\/v1$/, ""), apiKey, maxRetries: 0, timeout: 120000 });
const model = (await (await fetch(`${baseURL}/models`, { headers: { Authorization: `Bearer ${apiKey}` } })).json()).data[0].id;
const messages = [{ role: "user", content: "Tell me a story." }];
const request = { model, max_tokens: 16, temperature: 0, system: "You tell stories.", messages };

const whole = await client.messages.create(request);
check(whole.type === "message" && whole.role === "assistant" && whole.content[0].type === "text" &&
  whole.content[0].text.length > 0 && whole.stop_reason === "max_tokens" && whole.usage.output_tokens === 16,
  "a message", JSON.stringify(whole));

const stream = client.messages.stream(request);
let texts = "";
stream.on("text", (t) => { texts += t; });
const final = await stream.finalMessage();
check(final.content[0].text === whole.content[0].text && texts === whole.content[0].text &&
  final.stop_reason === "max_tokens", "a streamed message equals the whole one", JSON.stringify([final, whole]));

const schema = { type: "object", properties: { city: { type: "string", maxLength: 20 },
  unit: { type: "string", enum: ["celsius", "fahrenheit"] } }, required: ["city", "unit"] };
const validate = new Ajv().compile(schema);
const tools = [{ name: "get_weather", description: "Weather in a city.", input_schema: schema }];
for (let i = 0; i < 5; i++) {
  const r = await client.messages.create({ model, max_tokens: 150, messages, tools, tool_choice: { type: "any" },
    temperature: 1, top_k: 50 + i });
  const uses = r.content.filter((b) => b.type === "tool_use");
  if (r.stop_reason !== "tool_use" || uses.length === 0 || !uses.every((u) => u.name === "get_weather" && validate(u.input))) {
    check(false, `tool use ${i}`, JSON.stringify(r));
  }
}
check(true, "tool_choice any: tool_use blocks whose input validates, 5 times");

const toolStream = client.messages.stream({ model, max_tokens: 150, messages, tools,
  tool_choice: { type: "tool", name: "get_weather" } });
const streamedUse = (await toolStream.finalMessage()).content.find((b) => b.type === "tool_use");
check(streamedUse && validate(streamedUse.input), "streamed tool use assembled by the SDK", JSON.stringify(streamedUse));

const round = await client.messages.create({ model, max_tokens: 8, tools, messages: [
  ...messages,
  { role: "assistant", content: [{ type: "tool_use", id: streamedUse.id, name: "get_weather", input: streamedUse.input }] },
  { role: "user", content: [{ type: "tool_result", tool_use_id: streamedUse.id, content: "22 degrees" }] }] });
check(round.type === "message" && round.usage.input_tokens > whole.usage.input_tokens, "a tool_result round trip",
  JSON.stringify(round));

try {
  await client.messages.create({ ...request, model: "claude-sonnet-4-5" });
  check(false, "404 for an unknown model", "no error");
} catch (e) {
  check(e.status === 404 && e.error?.error?.type === "not_found_error", "404 for an unknown model", `${e.status} ${e.message}`);
}
console.log("all checks passed");
