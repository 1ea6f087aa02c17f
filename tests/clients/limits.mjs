// Limits of `tessera serve` (started by tests/apps/test_serve_cli.cpp with
// --queue 0 --max-body 4096): a body over the cap is a 413 and a request
// while the only place is taken is a 503, both as OpenAI error objects.
//
//   node tests/clients/limits.mjs BASE_URL API_KEY
import { check } from "./check.mjs";
const [baseURL, apiKey] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" };
const post = (body, signal) => fetch(`${baseURL}/chat/completions`, { method: "POST", headers, body, signal });

const big = await post(JSON.stringify({ messages: [{ role: "user", content: "x".repeat(8000) }] }));
const bigBody = await big.json();
check(big.status === 413 && bigBody.error?.type === "invalid_request_error", "413 for a body over the cap",
  `${big.status} ${JSON.stringify(bigBody)}`);

// A long stream holds the one place; the next request is turned away.
const controller = new AbortController();
const long = await post(JSON.stringify({ messages: [{ role: "user", content: "Once" }], max_tokens: 100000,
  temperature: 0, stream: true }), controller.signal);
check(long.status === 200, "a long stream starts", long.status);
const busy = await post(JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }));
const busyBody = await busy.json();
check(busy.status === 503 && busyBody.error?.type === "server_error", "503 while the queue is full",
  `${busy.status} ${JSON.stringify(busyBody)}`);
controller.abort();
// Once the stream is gone, requests are served again.
let served = false;
for (let i = 0; i < 300 && !served; ++i) {
  await new Promise((r) => setTimeout(r, 100));
  const again = await post(JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }));
  served = again.status === 200;
}
check(served, "served again after the stream ends");
console.log("all checks passed");
