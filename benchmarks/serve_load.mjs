// Load driver for benchmarks/serve.sh: streams chat completions from an
// OpenAI-compatible server (tessera serve, llama-server) and measures them.
//
//   node serve_load.mjs run --url http://127.0.0.1:PORT --label NAME [--clients "1 4 8"]
//                           [--requests 4] [--max-tokens 64] [--turns 5] [--turn-tokens 32]
//                           [--api completions|chat] [--schema FILE] > NAME.json
//   node serve_load.mjs table A.json B.json ...     (the side-by-side table)
//
// run: one warm-up request, then for each client count C, C clients at once,
// each sending --requests requests one after another (distinct short prompts,
// temperature 0, streamed, max_tokens --max-tokens). Per configuration:
//   aggregate tok/s   all generated tokens / wall time of the configuration
//   per-client tok/s  per client: sum over its requests of (tokens - 1) / sum of
//                     (last content chunk - first content chunk), i.e. its decode
//                     rate once its answer has started; then the mean over clients
//   TTFT p50 / p99    request sent -> first chunk with non-empty content
//                     (includes the time a request waits for a free slot)
// Then a chat of --turns turns (each turn resends the whole history plus a new
// user message; greedy, max_tokens --turn-tokens): TTFT of every turn, and how
// many of each turn's prompt tokens the server took from its cache (llama-server:
// the final chunk's timings.cache_n; tessera: /metrics'
// tessera_prompt_tokens_cached_total before and after).
// Generated tokens are counted from usage.completion_tokens (stream_options.
// include_usage), else one per content chunk.
// --api: completions (default) sends each conversation as a plain-text prompt
// ("User: ...\nAssistant: ...") to /v1/completions; chat sends the messages to
// /v1/chat/completions. Random-weight models make text llama-server's chat
// output parser refuses ("does not match the expected peg-native format"),
// so the default keeps both servers on the endpoint that takes any text.
// Even there, a lone byte token (a piece of a UTF-8 character) makes
// llama-server fail the request ("... Content-only format"): every request
// carries logit_bias -100 on the byte tokens <0x00>..<0xFF> (ids 3..258 of a
// Llama SentencePiece vocabulary; --no-byte-bias for another vocabulary).
// --schema FILE: every request carries the JSON schema in FILE as llama.cpp's
// "json_schema" field (both servers hold the output to it with a grammar).
import http from "node:http";
import { readFileSync } from "node:fs";

// A new connection per request: llama-server closes a connection after a
// streamed answer although it announces keep-alive.
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
const now = () => performance.now() / 1000;

function arg(args, name, fallback) {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
}

function get(url) {
  return new Promise((resolve, reject) => {
    http.get(url, { agent }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    }).on("error", reject);
  });
}

async function cachedTotal(base) {
  try {
    const r = await get(`${base}/metrics`);
    const m = /^tessera_prompt_tokens_cached_total (\d+)/m.exec(r.body);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

let api = "completions";
let schema = null;
let logitBias = Object.fromEntries([...Array(256).keys()].map((b) => [String(b + 3), -100]));
const plain = (messages) => messages.map((m) => `${m.role === "user" ? "User" : "Assistant"}: ${m.content}\n`).join("") +
  "Assistant:";

// One streamed completion of a conversation: timings, tokens, text.
function stream(base, messages, maxTokens) {
  const request = { max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } };
  if (logitBias) request.logit_bias = logitBias;
  if (schema) request.json_schema = schema;
  if (api === "chat") request.messages = messages;
  else request.prompt = plain(messages);
  const body = JSON.stringify(request);
  return new Promise((resolve, reject) => {
    const r = { sent: now(), first: null, last: null, chunks: 0, text: "", usage: null, timings: null };
    const req = http.request(`${base}/v1/${api === "chat" ? "chat/completions" : "completions"}`, {
      method: "POST", agent,
      headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) },
    }, (res) => {
      let buf = "", raw = "";
      res.setEncoding("utf8");
      res.on("data", (d) => {
        if (res.statusCode !== 200) { raw += d; return; }
        buf += d;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          for (const line of event.split("\n")) {
            if (!line.startsWith("data:")) continue;
            const data = line.slice(5).trim();
            if (data === "[DONE]") continue;
            let j;
            try { j = JSON.parse(data); } catch { continue; }
            if (j.error) { reject(new Error(`server error: ${JSON.stringify(j.error)}`)); return; }
            const content = api === "chat" ? j.choices?.[0]?.delta?.content : j.choices?.[0]?.text;
            if (content) {
              const t = now();
              if (r.first === null) r.first = t;
              r.last = t;
              r.chunks += 1;
              r.text += content;
            }
            if (j.usage) r.usage = j.usage;
            if (j.timings) r.timings = j.timings;
          }
        }
      });
      res.on("end", () => {
        if (res.statusCode !== 200) { reject(new Error(`HTTP ${res.statusCode}: ${raw.slice(0, 300)}`)); return; }
        r.end = now();
        r.tokens = r.usage?.completion_tokens ?? r.chunks;
        r.prompt_tokens = r.usage?.prompt_tokens ?? null;
        resolve(r);
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

const subjects = ["a lighthouse", "the river", "a lost key", "an old map", "the red fox", "a train", "the market",
  "a storm", "the garden", "a violin", "the moon", "a bakery", "the bridge", "a kite", "the mountain", "a letter"];
// Distinct in every configuration too (n: its client count), so that no
// server answers one from a cache of an earlier configuration's prompts.
const prompt = (n, c, i) =>
  `Run ${n}, client ${c}, request ${i}: tell me a short story about ${subjects[(c * 5 + i) % subjects.length]} ` +
  `and ${subjects[(c + 3 * i + 7) % subjects.length]}.`;

const quantile = (xs, q) => {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
};

async function load(base, clients, requests, maxTokens) {
  const start = now();
  const perClient = await Promise.all([...Array(clients).keys()].map(async (c) => {
    const rs = [];
    for (let i = 0; i < requests; ++i) rs.push(await stream(base, [{ role: "user", content: prompt(clients, c, i) }], maxTokens));
    return rs;
  }));
  const wall = now() - start;
  const all = perClient.flat();
  const tokens = all.reduce((s, r) => s + r.tokens, 0);
  const rates = perClient.map((rs) => {
    // Answers whose content came in one burst (a single chunk, or a tiny
    // model) say nothing about the decode rate.
    const timed = rs.filter((r) => r.first !== null && r.tokens > 1 && r.last - r.first > 1e-3);
    const n = timed.reduce((s, r) => s + r.tokens - 1, 0);
    const t = timed.reduce((s, r) => s + r.last - r.first, 0);
    return t > 0 ? n / t : null;
  }).filter((x) => x !== null);
  const ttft = all.filter((r) => r.first !== null).map((r) => r.first - r.sent);
  return {
    clients, requests: all.length, tokens, wall_s: wall, agg_tps: tokens / wall,
    client_tps: rates.length ? rates.reduce((a, b) => a + b, 0) / rates.length : null,
    ttft_p50: quantile(ttft, 0.5), ttft_p99: quantile(ttft, 0.99),
    empty: all.filter((r) => r.first === null).length,
  };
}

const userTurns = [
  "Hello! I am planning a trip to the mountains next month. What should I pack for cold nights?",
  "Good. How many days of food should I bring for a four day hike with two friends?",
  "We also want to cook by the lake. Which small stove works best at high altitude?",
  "What about water? Should we carry it all or filter it from the streams on the way?",
  "Finally, write a short checklist of everything we discussed so I can print it.",
  "Thanks. Anything else a beginner usually forgets on a trip like this?",
  "And how should we plan the route if one of us is slower than the others?",
  "Last question: what is the best way to store the food at night?",
];

async function chat(base, turns, maxTokens) {
  const messages = [];
  const out = [];
  for (let t = 0; t < turns; ++t) {
    messages.push({ role: "user", content: userTurns[t % userTurns.length] });
    const before = await cachedTotal(base);
    const r = await stream(base, messages, maxTokens);
    const after = await cachedTotal(base);
    const cached = r.timings?.cache_n ?? (before !== null && after !== null ? after - before : null);
    out.push({ turn: t + 1, ttft: r.first === null ? null : r.first - r.sent, prompt_tokens: r.prompt_tokens,
      cached_tokens: cached, tokens: r.tokens });
    messages.push({ role: "assistant", content: r.text });
  }
  return out;
}

async function run(args) {
  const base = arg(args, "--url");
  const label = arg(args, "--label", base);
  const clients = arg(args, "--clients", "1 4 8").trim().split(/[\s,]+/).map(Number);
  const requests = Number(arg(args, "--requests", "4"));
  const maxTokens = Number(arg(args, "--max-tokens", "64"));
  const turns = Number(arg(args, "--turns", "5"));
  const turnTokens = Number(arg(args, "--turn-tokens", "32"));
  api = arg(args, "--api", "completions");
  if (args.includes("--no-byte-bias")) logitBias = null;
  const schemaFile = arg(args, "--schema", null);
  if (schemaFile) schema = JSON.parse(readFileSync(schemaFile, "utf8"));
  if (api !== "completions" && api !== "chat") throw new Error(`--api takes completions or chat, not ${api}`);
  const log = (s) => process.stderr.write(`  ${label}: ${s}\n`);
  await stream(base, [{ role: "user", content: "Warm-up: say hello." }], 8);
  const configs = [];
  for (const c of clients) {
    const r = await load(base, c, requests, maxTokens);
    log(`${c} client(s) x ${requests} requests: ${r.tokens} tokens in ${r.wall_s.toFixed(1)} s, ` +
      `${r.agg_tps.toFixed(2)} tok/s aggregate, TTFT p50 ${r.ttft_p50?.toFixed(2)} s p99 ${r.ttft_p99?.toFixed(2)} s`);
    configs.push(r);
  }
  const turnsOut = await chat(base, turns, turnTokens);
  for (const t of turnsOut) {
    log(`chat turn ${t.turn}: TTFT ${t.ttft?.toFixed(2)} s, prompt ${t.prompt_tokens} tokens (${t.cached_tokens ?? "?"} cached)`);
  }
  process.stdout.write(JSON.stringify({ label, requests, max_tokens: maxTokens, configs, chat: turnsOut }) + "\n");
}

function table(files) {
  const runs = files.map((f) => JSON.parse(readFileSync(f, "utf8")));
  const f = (x, d = 2) => (x === null || x === undefined ? "-" : x.toFixed(d));
  const pad = (s, n) => String(s).padStart(n);
  const w = Math.max(14, ...runs.map((r) => r.label.length));
  console.log(`${"server".padEnd(w)} ${pad("clients", 7)} ${pad("reqs", 5)} ${pad("tokens", 7)} ${pad("wall s", 7)} ` +
    `${pad("agg tok/s", 9)} ${pad("client tok/s", 12)} ${pad("TTFT p50 s", 10)} ${pad("TTFT p99 s", 10)}`);
  for (const r of runs) {
    for (const c of r.configs) {
      console.log(`${r.label.padEnd(w)} ${pad(c.clients, 7)} ${pad(c.requests, 5)} ${pad(c.tokens, 7)} ` +
        `${pad(f(c.wall_s, 1), 7)} ${pad(f(c.agg_tps), 9)} ${pad(f(c.client_tps), 12)} ${pad(f(c.ttft_p50), 10)} ` +
        `${pad(f(c.ttft_p99), 10)}` + (c.empty ? `  (${c.empty} answers without content)` : ""));
    }
  }
  console.log("");
  const turns = runs[0]?.chat.length ?? 0;
  console.log(`chat of ${turns} turns (whole history resent each turn): time to first token`);
  console.log(`${"server".padEnd(w)} ${pad("turn 1 s", 9)} ${pad(`turn ${turns} s`, 9)} ${pad("ratio", 6)}  ` +
    `${pad(`turn ${turns} prompt`, 14)} ${pad("cached", 7)}`);
  for (const r of runs) {
    const a = r.chat[0], b = r.chat[r.chat.length - 1];
    console.log(`${r.label.padEnd(w)} ${pad(f(a?.ttft), 9)} ${pad(f(b?.ttft), 9)} ` +
      `${pad(a?.ttft && b?.ttft ? f(b.ttft / a.ttft) : "-", 6)}  ${pad(b?.prompt_tokens ?? "-", 14)} ` +
      `${pad(b?.cached_tokens ?? "-", 7)}`);
  }
  // What the schema costs each server: its runs with the schema against
  // those without, per client count.
  for (const r of runs.filter((x) => x.label.endsWith(" +schema"))) {
    const plain = runs.find((x) => x.label === r.label.replace(/ \+schema$/, ""));
    if (!plain) continue;
    for (const c of r.configs) {
      const p = plain.configs.find((x) => x.clients === c.clients);
      if (p) {
        console.log(`with / without the schema, ${plain.label}, ${c.clients} client(s): aggregate ` +
          `${f(c.agg_tps / p.agg_tps)}, per client ${f(c.client_tps / p.client_tps)}`);
      }
    }
  }
  // Every tessera run against every other server's run, at 4 clients.
  const at4 = (r) => r.configs.find((c) => c.clients === 4);
  const ours = runs.filter((r) => r.label.startsWith("tessera") && at4(r));
  const others = runs.filter((r) => !r.label.startsWith("tessera") && at4(r));
  if (ours.length && others.length) console.log("");
  for (const t of ours) {
    for (const o of others) {
      console.log(`aggregate tok/s at 4 clients, ${t.label} / ${o.label}: ` +
        `${f(at4(t).agg_tps / at4(o).agg_tps)}  (${f(at4(t).agg_tps)} / ${f(at4(o).agg_tps)})`);
    }
  }
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === "run") {
  run(rest).catch((e) => { process.stderr.write(`serve_load: ${e.message}\n`); process.exit(1); });
} else if (mode === "table") {
  table(rest);
} else {
  process.stderr.write("usage: node serve_load.mjs run --url URL --label NAME ... | table FILE...\n");
  process.exit(2);
}
