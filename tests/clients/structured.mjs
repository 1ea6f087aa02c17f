// Structured output through the official OpenAI client: `parse` with a
// nested JSON schema (objects, arrays, enums, numbers, required fields), 20
// seeds, each answer checked by ajv (a JSON-schema validator); json_object
// mode; llama.cpp's `grammar` field; and hostile schemas and grammars, each a
// quick 400 naming what is wrong. The model has random weights: only the
// constraint makes its output valid.
//
//   node tests/clients/structured.mjs BASE_URL API_KEY
import OpenAI from "openai";
import Ajv from "ajv";
import { check } from "./check.mjs";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;
const messages = [{ role: "user", content: "Describe a book." }];

const schema = {
  type: "object",
  properties: {
    title: { type: "string", maxLength: 30 },
    year: { type: "integer" },
    price: { type: "number" },
    available: { type: "boolean" },
    genre: { type: "string", enum: ["drama", "comedy", "noir"] },
    authors: {
      type: "array", maxItems: 2,
      items: {
        type: "object",
        properties: { name: { type: "string", maxLength: 12 }, role: { enum: ["writer", "editor"] } },
        required: ["name", "role"], additionalProperties: false,
      },
    },
    isbn: { type: ["string", "null"], maxLength: 13 },
  },
  required: ["title", "year", "price", "available", "genre", "authors", "isbn"],
  additionalProperties: false,
};
const validate = new Ajv({ strict: false }).compile(schema);

const response_format = { type: "json_schema", json_schema: { name: "book", schema, strict: true } };
// Four requests at a time: with --parallel they share batches, each slot
// held to its own constraint.
const one = async (seed) => {
  const completion = await client.beta.chat.completions.parse({
    model, messages, response_format, seed, temperature: 1, max_tokens: 250,
  });
  const parsed = completion.choices[0].message.parsed;
  if (parsed === null || !validate(parsed)) {
    check(false, `schema seed ${seed}`,
      JSON.stringify([completion.choices[0].message.content, validate.errors, completion.choices[0].finish_reason]));
  }
};
for (let seed = 1; seed <= 20; seed += 4) await Promise.all([0, 1, 2, 3].map((i) => one(seed + i)));
check(true, "20 seeds of a nested schema parse and validate");

const object = await client.chat.completions.create({
  model, messages, response_format: { type: "json_object" }, seed: 5, max_tokens: 120,
});
let value;
try { value = JSON.parse(object.choices[0].message.content); } catch (e) { value = e; }
check(value !== null && typeof value === "object" && !Array.isArray(value), "json_object mode gives an object",
  object.choices[0].message.content);

// Streamed: the pieces join into the same valid JSON.
let streamed = "";
for await (const chunk of await client.chat.completions.create({
  model, messages, response_format, seed: 3, max_tokens: 250, stream: true,
})) streamed += chunk.choices[0]?.delta?.content ?? "";
let streamedValue = null;
try { streamedValue = JSON.parse(streamed); } catch {}
check(streamedValue !== null && validate(streamedValue), "a streamed answer validates", streamed);

// llama.cpp's grammar field, on the completions endpoint.
const grammar = 'root ::= ("yes" | "no") ", because " [a-z ]{1,20} "."';
const answer = (await client.completions.create({ model, prompt: "Is it?", max_tokens: 60, seed: 9, grammar }))
  .choices[0].text;
check(/^(yes|no), because [a-z ]{1,20}\.$/.test(answer), "a GBNF grammar holds", answer);

// Hostile input: each a 400 naming the problem, fast.
const recursive = { $ref: "#/$defs/node",
  $defs: { node: { type: "object", properties: { next: { $ref: "#/$defs/node" } } } } };
const huge = { type: "object", properties: {} };
for (let i = 0; i < 6000; i++) huge.properties[`p${i}`] = { type: "string" };
const contradictory = { type: "array", items: { type: "integer" }, minItems: 5, maxItems: 2 };
const cases = [
  [{ response_format: { type: "json_schema", json_schema: { name: "r", schema: recursive } } }, "refers to itself"],
  [{ response_format: { type: "json_schema", json_schema: { name: "h", schema: huge } } }, "at most"],
  [{ response_format: { type: "json_schema", json_schema: { name: "c", schema: contradictory } } }, "below"],
  [{ grammar: 'root ::= "a" root' }, "matches no text"],
  [{ grammar: 'root ::= [' }, "not closed"],
  [{ response_format: { type: "xml" } }, "json_object or json_schema"],
];
for (const [extra, expected] of cases) {
  const started = Date.now();
  let status = 0, message = "";
  try {
    await client.chat.completions.create({ model, messages, max_tokens: 5, ...extra });
  } catch (e) {
    status = e.status;
    message = e.error?.message ?? String(e);
  }
  check(status === 400 && message.includes(expected) && Date.now() - started < 10000,
    `400 for ${JSON.stringify(extra).slice(0, 60)}`, `${status} ${message}`);
}
console.log("all checks passed");
