// Two servers on the same model (one plain, one with speculative decoding)
// give the same greedy answers, streamed and not, with the official client.
//
//   node tests/clients/same_answers.mjs BASE_URL_A BASE_URL_B API_KEY [REQUEST_FIELDS_JSON]
// (the fields are added to every request, e.g. a response_format; then each
// answer must also parse as JSON).
import OpenAI from "openai";

const [a, b, apiKey, fields] = process.argv.slice(2);
const extra = fields ? JSON.parse(fields) : {};
const clients = [a, b].map((baseURL) => new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 }));
const model = (await clients[0].models.list()).data[0].id;
const subjects = ["dog", "cat", "girl", "boy", "bird", "tree", "ball", "sun"];
const answer = async (client, i, stream) => {
  const request = { model, temperature: 0, max_tokens: 40,
    messages: [{ role: "user", content: `Tell me about the ${subjects[i]}` }], ...extra };
  if (!stream) return (await client.chat.completions.create(request)).choices[0].message.content;
  let text = "";
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    text += chunk.choices[0]?.delta?.content ?? "";
  }
  return text;
};
let same = 0;
for (let i = 0; i < subjects.length; ++i) {
  const stream = i % 2 === 1;
  const [x, y] = [await answer(clients[0], i, stream), await answer(clients[1], i, stream)];
  let parses = true;
  if (fields) try { JSON.parse(x); } catch { parses = false; }
  if (x === y && x.length > 0 && parses) ++same;
  else console.log(`differ on ${i}: ${JSON.stringify(x)} vs ${JSON.stringify(y)}`);
}
console.log(`${same} of ${subjects.length} answers equal`);
if (same !== subjects.length) {
  console.log("FAIL");
  process.exit(1);
}
console.log("all checks passed");
