// The chat page of `tessera serve` in headless Chromium (Debian's chromium,
// driven by playwright-core): the plan is shown, a message typed and sent
// streams an answer in, Stop ends a long answer (the text stops growing), tok/s
// is shown, JSON mode answers JSON, a required tool call is shown, and the
// conversation survives a reload (localStorage). Saves a screenshot.
//
//   node tests/clients/web_page.mjs BASE_URL API_KEY SCREENSHOT.png
import { chromium } from "playwright-core";
import { check } from "./check.mjs";

const [baseURL, apiKey, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--headless=new"] });
try {
  const page = await browser.newPage();
  await page.goto(baseURL + "/");
  await page.fill("#key", apiKey);
  await page.dispatchEvent("#key", "change");
  await page.reload();
  await page.waitForFunction(() => document.querySelector("#plan").textContent.includes("rank"), null,
    { timeout: 10000 });
  check(true, "the plan is shown");

  await page.fill("#input", "Once upon a time");
  await page.click("#send");
  const answer = page.locator(".msg.assistant .text").last();
  await page.waitForFunction(() => {
    const t = document.querySelectorAll(".msg.assistant .text");
    return t.length && t[t.length - 1].textContent.length > 20;
  }, null, { timeout: 30000 });
  check(true, "the answer streams in");
  await page.click("#stop");
  await page.waitForFunction(() => !document.querySelector("#stop").disabled === false, null, { timeout: 10000 });
  const stoppedAt = (await answer.textContent()).length;
  await page.waitForTimeout(1500);
  const later = (await answer.textContent()).length;
  check(later === stoppedAt, "Stop ends the answer", `${stoppedAt} then ${later} characters`);
  const speed = await page.textContent("#speed");
  check(/tok\/s/.test(speed) && /stopped/.test(speed), "tok/s shown", speed);

  // JSON mode: the answer parses; a tool list with a required call: the
  // call is shown.
  const finished = () => page.waitForFunction(() => !document.querySelector("#send").disabled, null, { timeout: 60000 });
  await page.check("#json");
  await page.fill("#input", "Describe a cat as JSON.");
  await page.click("#send");
  await page.waitForFunction(() => document.querySelector("#send").disabled === true || true);
  await finished();
  const jsonText = await page.locator(".msg.assistant .text").last().textContent();
  let parsed = null;
  try { parsed = JSON.parse(jsonText); } catch {}
  check(parsed !== null && typeof parsed === "object", "JSON mode gives JSON", jsonText.slice(0, 200));
  await page.uncheck("#json");
  // A new conversation: the JSON answer may have filled most of the context.
  await page.click("#new");
  await page.click("#options summary");
  await page.fill("#tools", JSON.stringify([{ type: "function", function: { name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } }, required: ["city"] } } }]));
  await page.selectOption("#tool-choice", "required");
  await page.fill("#input", "Weather in Paris?");
  await page.click("#send");
  await finished();
  const call = await page.locator(".msg.assistant .tool").last().textContent({ timeout: 10000 });
  check(/^tool call get_weather\(\{"city":/.test(call), "a tool call is shown", call);
  const calls = await page.locator(".msg.assistant .tool").count();
  await page.fill("#tools", "");

  await page.screenshot({ path: screenshot, fullPage: true });
  await page.reload();
  await page.waitForSelector(".msg.assistant");
  const kept = await page.locator(".msg").count();
  check(kept === 2, "the conversation survives a reload", `${kept} messages`);
  check(await page.locator(".conv").count() === 2, "and the one before it", "");
  const callsKept = await page.locator(".msg.assistant .tool").count();
  check(calls >= 1 && callsKept === calls, "its tool calls too", `${calls} then ${callsKept}`);
  console.log("all checks passed");
} finally {
  await browser.close();
}
