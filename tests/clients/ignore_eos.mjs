// serve --ignore-eos: a completion whose every step samples the end-of-text
// token (logit_bias +100 on it) ends at once on a plain server, and runs to
// max_tokens on one started with --ignore-eos.
//
//   node tests/clients/ignore_eos.mjs PLAIN_URL IGNORING_URL API_KEY
import { check } from "./check.mjs";

const [plain, ignoring, apiKey] = process.argv.slice(2);
const complete = async (base) => {
  const res = await fetch(base + "/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 12, temperature: 0, logit_bias: { "2": 100 } }),
  });
  check(res.ok, `${base} answers`, res.status);
  return res.json();
};
const a = await complete(plain);
check(a.choices[0].finish_reason === "stop" && a.usage.completion_tokens <= 1, "a plain server stops at end-of-text",
  JSON.stringify(a));
const b = await complete(ignoring);
check(b.choices[0].finish_reason === "length" && b.usage.completion_tokens === 12,
  "--ignore-eos generates to max_tokens", JSON.stringify(b));
console.log("all checks passed");
