// 8 clients x 10 requests each against `tessera serve`, greedy: every answer
// equals the same request served alone, and none is lost or answered twice
// (each answer is checked against its own request's).
//
// With "batched" (a server with --parallel N > 1), the concurrent phase must
// also have run several requests' tokens in shared batches (/metrics), and
// every request's time to first token is in its histogram; with
// "batched-distributed", /metrics must also show every node's step times.
//
//   node tests/clients/concurrent.mjs BASE_URL API_KEY [batched|batched-distributed]
import OpenAI from "openai";

const [baseURL, apiKey, mode] = process.argv.slice(2);
const metrics = async () => {
  const text = await (await fetch(baseURL.replace(/\/v1$/, "/metrics"), { headers: { Authorization: `Bearer ${apiKey}` } })).text();
  const value = (name) => Number(text.match(new RegExp(`^${name} (\\S+)$`, "m"))?.[1] ?? NaN);
  const nodes = [...text.matchAll(/^tessera_node_steps_total\{node="([^"]*)",role="([^"]*)"\} (\d+)$/gm)];
  return { batches: value("tessera_batches_total"), sequences: value("tessera_batch_sequences_total"),
    ttft: value("tessera_time_to_first_token_seconds_count"), nodes };
};
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;
const subjects = ["dog", "cat", "girl", "boy", "bird", "tree", "ball", "sun", "moon", "fish"];
const request = (c, i) => ({
  model, temperature: 0, max_tokens: 12,
  messages: [{ role: "user", content: `Client ${c} asks about the ${subjects[i]} and the ${subjects[(i + c) % 10]}` }],
});
const answer = async (c, i) => (await client.chat.completions.create(request(c, i))).choices[0].message.content;

// Alone, one after another.
const alone = new Map();
for (let c = 0; c < 8; ++c) for (let i = 0; i < 10; ++i) alone.set(`${c}/${i}`, await answer(c, i));
// All clients at once, each sending its 10 requests in turn.
const before = await metrics();
const together = new Map();
await Promise.all([...Array(8).keys()].map(async (c) => {
  for (let i = 0; i < 10; ++i) together.set(`${c}/${i}`, await answer(c, i));
}));
let same = 0;
for (const [key, text] of alone) if (together.get(key) === text) ++same;
console.log(`${together.size} answers, ${same} equal to the request served alone`);
if (mode?.startsWith("batched")) {
  const after = await metrics();
  if (!(after.ttft - before.ttft >= 80)) {
    console.log(`FAIL: ${after.ttft - before.ttft} times to first token recorded for 80 requests`);
    process.exit(1);
  }
  if (mode === "batched-distributed") {
    console.log(`node steps: ${after.nodes.map((m) => `${m[2]} ${m[1]} ${m[3]}`).join(", ")}`);
    if (after.nodes.length < 2 || after.nodes.some((m) => !(Number(m[3]) > 0))) {
      console.log("FAIL: /metrics lacks the plan's per-node step times");
      process.exit(1);
    }
  }
  const batches = after.batches - before.batches, sequences = after.sequences - before.sequences;
  console.log(`${sequences} sequence steps in ${batches} batches`);
  if (!(sequences > 1.2 * batches)) {
    console.log("FAIL: concurrent requests did not share batches");
    process.exit(1);
  }
}
if (together.size !== 80 || same !== 80) {
  console.log("FAIL");
  process.exit(1);
}
console.log("all checks passed");
