// Drives the hopwise page in headless Chromium: ask, watch the graph appear, open a node, screenshot.
// Usage: node page.cjs <base url> <screenshot.png> <question>
// Prints one JSON object with what the page showed; exits non-zero on any failure.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { chromium } = require("playwright-core");

const [base, shot, question] = process.argv.slice(2);
const ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
  "--disable-component-update", "--no-first-run", "--disable-sync",
];

(async () => {
  // An empty profile every run; playwright takes it as the persistent context's directory.
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "hopwise-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ARGS,
    viewport: { width: 1280, height: 900 },
  });
  const errors = [];
  try {
    const page = context.pages()[0] || (await context.newPage());
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    await page.goto(base + "/");
    await page.waitForSelector('#strategy option[value="toqd-paper"]', { state: "attached", timeout: 15000 });
    await page.selectOption("#strategy", "toqd-paper");
    await page.fill("#question", question);
    await page.click("#ask");
    // The first node must show up while the question is still being answered.
    await page.waitForSelector('#graph .node[data-id="1"]', { timeout: 30000 });
    const answerHiddenAtFirstNode = await page.$eval("#result", (e) => e.hidden);
    await page.waitForFunction(() => document.querySelector("#answer").textContent.trim().length > 0, null, { timeout: 30000 });
    const nodes = await page.$$eval("#graph .node", (els) => els.map((e) => ({ id: e.dataset.id, decision: e.dataset.decision })));
    const edges = await page.$$eval("#graph line.edge", (els) => els.length);
    await page.click('#graph .node[data-id="2"]');
    await page.waitForSelector("#detail:not([hidden])", { timeout: 5000 });
    const text = (sel) => page.$eval(sel, (e) => e.textContent.trim());
    const detail = {
      id: await text("#detail-id"),
      decision: await text("#detail-decision"),
      question: await text("#detail-question"),
      rewritten: await text("#detail-rewritten"),
      answer: await text("#detail-answer"),
      passages: await page.$$eval("#detail-passages li", (els) => els.map((e) => e.textContent.trim())),
    };
    const result = {
      answerHiddenAtFirstNode,
      nodes,
      edges,
      detail,
      answer: await text("#answer"),
      citations: await page.$$eval("#citations li", (els) => els.map((e) => e.textContent.trim())),
      stats: await text("#stats"),
      status: await text("#status"),
      errors,
    };
    await page.screenshot({ path: shot, fullPage: true });
    console.log(JSON.stringify(result));
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
})().catch((e) => {
  console.error(String(e && e.stack ? e.stack : e));
  process.exit(1);
});
