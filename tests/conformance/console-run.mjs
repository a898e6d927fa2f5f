#!/usr/bin/env node
// The operator console (`/console`, issue #55) in headless Chromium, through the real
// world-celld clients: a DevKit app whose deliveries pass a "bad deploy" in front of it (every
// request answered 500 with an error body), so that a real workflow's message is
// dead-lettered (QUEUE_MAX_ATTEMPTS=2); the console shows it with its run, attempts, last
// error and the start of the app's answer; the app is fixed, the operator clicks Redrive, and
// the run completes. One fresh worker and app per client. Prints one line per client:
//
//   console 0.4.0: N passed, N failed
//
//   node tests/conformance/console-run.mjs [--client 0.3|0.4] [--profile beta42|beta55]
//        [--docs-image] [--verbose]
//
//   --docs-image   copy the first client's screenshot to docs/images/console.png (the README's)
//
// Without a Chromium it prints `console: SKIP (no chromium)` and exits 0. Screenshots go to
// tests/conformance/.artifacts/console/.

import http from "node:http";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { FILE } from "./inspect.mjs";
import { buildWebApp, chromiumPath } from "./web-ui.mjs";
import { startApp } from "./lib/app.mjs";
import { CLIENTS, ensureProfile, PROFILES } from "./lib/profile.mjs";
import { startServer } from "./lib/workers.mjs";

const ARTIFACTS = fileURLToPath(new URL("./.artifacts/console", import.meta.url));
const DOCS_IMAGE = fileURLToPath(new URL("../../docs/images/console.png", import.meta.url));
const BAD_DEPLOY = '{"error":"bad deploy: DATABASE_URL is not set"}';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] && !args[i + 1].startsWith("--") ? args[i + 1] : dflt;
};
const profile = opt("--profile", "beta42");
const clients = opt("--client") ? [opt("--client")] : Object.keys(CLIENTS).reverse();
const verbose = args.includes("--verbose");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Check extends Error {}
function assert(ok, what) {
  if (!ok) throw new Check(what);
}

/**
 * The app's front: while `broken`, every request is answered 500 with BAD_DEPLOY (what a bad
 * deploy answers); otherwise forwarded to `target` as it came.
 */
async function startFront() {
  const front = { broken: true, target: null, refused: 0, forwarded: 0 };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      if (front.broken || !front.target) {
        front.refused++;
        res.writeHead(500, { "content-type": "application/json" });
        res.end(BAD_DEPLOY);
        return;
      }
      front.forwarded++;
      try {
        const headers = { ...req.headers };
        delete headers.host;
        delete headers["content-length"];
        const r = await fetch(front.target + req.url, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
        const body = Buffer.from(await r.arrayBuffer());
        res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "application/json" });
        res.end(body);
      } catch (e) {
        res.writeHead(502);
        res.end(String(e));
      }
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  front.url = `http://127.0.0.1:${server.address().port}`;
  front.close = () => new Promise((r) => server.close(r));
  return front;
}

async function consoleSuite({ client, app: appDir, browser, docsImage }) {
  const results = [];
  const check = async (name, fn) => {
    try {
      await fn();
      results.push({ name, ok: true });
    } catch (e) {
      results.push({ name, ok: false, error: e instanceof Check ? e.message : String(e?.stack ?? e) });
      throw e;
    }
  };
  const server = await startServer({ client, profile, vars: { QUEUE_MAX_ATTEMPTS: "2" } });
  const front = await startFront();
  let app;
  let page;
  try {
    app = await startApp({ profile, dir: appDir, client, server, env: { WORKFLOW_BASE_URL: front.url } });
    front.target = app.url;
    const admin = async (path) => {
      const r = await fetch(server.url + path, { headers: { authorization: `Bearer ${server.secret}` } });
      return r.json();
    };
    const { runId } = await app.start(FILE, "steps", [2]);
    let dead;
    await check("a workflow's message is dead-lettered by the bad deploy", async () => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const page = await admin("/v1/admin/queues/q%3A0/dead-letters");
        dead = page.data?.[0];
        if (dead) break;
        assert(Date.now() < deadline, `no dead letter after 30 s (${front.refused} deliveries refused by the bad deploy)`);
        await sleep(200);
      }
      assert(front.refused >= 2, `${front.refused} deliveries reached the bad deploy`);
    });

    page = await browser.newPage();
    page.setDefaultTimeout(20_000);
    await page.setViewport({ width: 1360, height: 1000 });
    const errors = [];
    const elsewhere = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    page.on("request", (r) => !r.url().startsWith(server.url) && elsewhere.push(r.url()));
    page.on("dialog", (d) => d.accept());
    const row = `tr.dead-letter[data-message-id="${dead.messageId}"]`;
    const cell = (field) => page.$eval(`${row} [data-field="${field}"]`, (e) => e.textContent.trim());

    await check("the console asks for the secret, and refuses a wrong one", async () => {
      await page.goto(`${server.url}/console`, { waitUntil: "networkidle0" });
      await page.waitForSelector("#login:not([hidden])");
      await page.type("#secret", "not-the-secret");
      await page.click("#login-submit");
      await page.waitForSelector("#login-error:not([hidden])");
      const url = page.url();
      assert(!url.includes("secret"), `the URL carries the secret: ${url}`);
    });

    await check("signed in, the shard and the dead letter are shown: run, attempts, last error, the app's answer", async () => {
      await page.$eval("#secret", (e) => (e.value = ""));
      await page.type("#secret", server.secret);
      await page.click("#login-submit");
      await page.waitForSelector('section.shard[data-shard="q:0"]');
      // The wrong secret's 401 (logged by the browser) was the point of the previous check.
      errors.length = 0;
      await page.waitForSelector(row);
      const deadLetters = await page.$eval('section.shard[data-shard="q:0"] [data-field="deadLetters"]', (e) => e.textContent.trim());
      assert(deadLetters === "1", `dead letters shown: ${deadLetters}`);
      const shown = { queueName: await cell("queueName"), runId: await cell("runId"), attempts: await cell("attempts"), lastError: await cell("lastError"), lastAnswer: await cell("lastAnswer") };
      assert(shown.queueName.startsWith("__wkf_workflow_"), `queue name ${shown.queueName}`);
      assert(dead.runId === null || shown.runId === dead.runId, `run ${shown.runId}, listed ${dead.runId}`);
      assert(dead.runId === null || dead.runId === runId, `the dead letter's run ${dead.runId} is not the workflow's ${runId}`);
      assert(shown.attempts === "2", `attempts ${shown.attempts}`);
      assert(shown.lastError === "HTTP 500", `last error ${shown.lastError}`);
      assert(shown.lastAnswer.includes("bad deploy: DATABASE_URL is not set"), `last answer ${shown.lastAnswer}`);
      assert(await page.$('section.shard[data-shard="q:0"] svg.chart'), "no chart");
      const stored = await page.evaluate(() => document.cookie);
      assert(stored === "", `cookies: ${stored}`);
      mkdirSync(ARTIFACTS, { recursive: true });
      const file = join(ARTIFACTS, `${client}-dead-letter.png`);
      await page.screenshot({ path: file, fullPage: true });
      if (docsImage) copyFileSync(file, DOCS_IMAGE);
    });

    await check("the app fixed, Redrive delivers the message and the run completes", async () => {
      front.broken = false;
      await page.click(`${row} button[data-action="redrive"]`);
      await page.waitForFunction((sel) => !document.querySelector(sel), { timeout: 30_000 }, row);
      const run = await app.waitRun(runId, { timeoutMs: 60_000 });
      assert(run.status === "completed", `run ${runId} is ${run.status}`);
      assert(front.forwarded >= 1, "nothing reached the fixed app");
      const status = await page.$eval("#status", (e) => e.textContent);
      assert(/redriven/i.test(status), `status line: ${status}`);
      await page.waitForFunction(() => document.querySelector('section.shard[data-shard="q:0"] [data-field="deadLetters"]')?.textContent.trim() === "0");
      await page.screenshot({ path: join(ARTIFACTS, `${client}-redriven.png`), fullPage: true });
    });

    await check("nothing loaded from elsewhere, no script error or policy violation", async () => {
      assert(elsewhere.length === 0, `requests elsewhere: ${elsewhere.join(", ")}`);
      assert(errors.length === 0, `page errors: ${errors.join(" | ")}`);
    });
  } catch (e) {
    if (!(e instanceof Check) && !results.some((r) => !r.ok)) results.push({ name: "setup", ok: false, error: String(e?.stack ?? e) });
    if (verbose && app) console.log(app.log().slice(-3000));
  } finally {
    await page?.close().catch(() => {});
    await app?.stop().catch(() => {});
    await front.close();
    await server.dispose?.();
  }
  return results;
}

if (!chromiumPath()) {
  console.log("console: SKIP (no chromium)");
  process.exit(0);
}
for (const c of clients) if (!CLIENTS[c]) throw new Error(`unknown client ${c} (${Object.keys(CLIENTS).join(", ")})`);
if (!PROFILES[profile]) throw new Error(`unknown profile ${profile}`);
ensureProfile(profile);
const appDir = buildWebApp(profile);
const { default: puppeteer } = await import("puppeteer-core");
const browser = await puppeteer.launch({
  executablePath: chromiumPath(),
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking"],
});
const lines = [];
let anyFailed = false;
try {
  for (const client of clients) {
    const results = await consoleSuite({ client, app: appDir, browser, docsImage: args.includes("--docs-image") && client === clients[0] });
    const failed = results.filter((r) => !r.ok);
    for (const f of failed) console.log(`FAIL [console ${CLIENTS[client]}] ${f.name}\n  ${f.error.replace(/\n/g, "\n  ")}`);
    if (verbose) for (const r of results.filter((x) => x.ok)) console.log(`ok [console ${CLIENTS[client]}] ${r.name}`);
    lines.push(`console ${CLIENTS[client]}: ${results.length - failed.length} passed, ${failed.length} failed`);
    if (failed.length) anyFailed = true;
  }
} finally {
  await browser.close();
}
for (const line of lines) console.log(line);
process.exit(anyFailed ? 1 : 0);
