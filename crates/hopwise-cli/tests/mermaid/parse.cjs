// Parses Mermaid text with Mermaid itself (its browser bundle, in headless Chromium).
// Usage: node parse.cjs <file with the diagram>
// Prints {"ok": true, "type": ...} or {"ok": false, "error": ...}; exits non-zero when it does not parse.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { chromium } = require("playwright-core");

const text = fs.readFileSync(process.argv[2], "utf8");
const bundle = require.resolve("mermaid/dist/mermaid.min.js");

(async () => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "hopwise-mermaid-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  });
  let result;
  try {
    const page = context.pages()[0] || (await context.newPage());
    await page.addScriptTag({ path: bundle });
    result = await page.evaluate(async (diagram) => {
      try {
        const parsed = await window.mermaid.parse(diagram);
        return { ok: true, type: parsed && parsed.diagramType };
      } catch (e) {
        return { ok: false, error: String(e && e.message ? e.message : e) };
      }
    }, text);
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  console.log(JSON.stringify(result));
  process.exit(result.ok ? 0 : 1);
})().catch((e) => {
  console.log(JSON.stringify({ ok: false, error: String(e) }));
  process.exit(2);
});
