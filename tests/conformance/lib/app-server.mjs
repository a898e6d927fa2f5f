// A Workflow DevKit app as a user runs one: the Workflow runtime of a profile with a real
// world-celld client as its World, serving the flow route the queue delivers to. It runs on
// Node 22 inside a built app directory (lib/profile.mjs buildApp copies it there, next to
// dist/.well-known/workflow/v1), started by lib/app.mjs:
//
//   WORLD_MODULE=world-celld-0.3 CELLD_FLEET_URL=… node server.mjs
//
// Routes (all local):
//   POST /.well-known/workflow/v1/flow   the runtime's handler (queue deliveries)
//   POST /start {file, workflow, args}   start() a workflow of the manifest → {runId,
//                                        clientStart: Date.now() right before start()}
//   GET  /runs/:runId                    world.runs.get, as JSON (Dates as ISO strings)
//   GET  /runs/:runId/output             the run's hydrated return value as JSON
//   GET  /runs/:runId/readable           the run's default output stream, as bytes
//   GET  /runs/:runId/events             all the run's events, oldest first, without their
//                                        data (world.events.list, every page)
//   GET  /trace, POST /trace/reset       every request the client sent to the server and
//                                        every delivery the app received, in order (a
//                                        request's `eventType` when its body names one,
//                                        then its `correlationId`; an applyEvent's `ok`:
//                                        whether the server applied the event, and `okAt`
//                                        (Date.now() when that was known); a
//                                        delivery's messageId and attempt)
//   GET  /runs/:runId/settled            waits, without asking the server, until the trace
//                                        holds the run's terminal event (run_completed,
//                                        run_failed, run_cancelled) answered and nothing
//                                        has been in flight for ?quietMs= (default 15);
//                                        ?timeoutMs= (default 60000) → 504. For the bench:
//                                        polling the run would add requests to the run
//   GET  /executions                     what step bodies recorded in the array
//                                        globalThis.__stepExecutions (e.g. one entry per
//                                        body run, to count re-executions)
//   GET  /deliveries, POST /deliveries/reset
//                                        the deliveries as the app saw them (the I/O
//                                        bench's counters, kept here so that nothing sits
//                                        between a World and the app): open at once and the
//                                        peak, accepted, refused, failed, statuses, and each
//                                        accepted one's messageId, attempt, arrival, answer
//                                        and status. BENCH_DELIVERY_LIMIT=N: a delivery
//                                        arriving with N open is answered 429 (Retry-After:
//                                        1) before the runtime sees it (an app that refuses
//                                        when full). BENCH_COUNT_DELIVERIES=0: no counting
//                                        at all (the bench's check that counting moves
//                                        nothing)
// WORKFLOW_BASE_URL=self: deliveries come to this app at http://127.0.0.1:$PORT (the port
// known once it listens).
// On listening it prints one line `{"listening":PORT}` to stdout.

import { createServer } from "node:http";
import { readFileSync } from "node:fs";

const manifest = JSON.parse(readFileSync(new URL("./dist/.well-known/workflow/v1/manifest.json", import.meta.url), "utf8"));
const fleet = (process.env.CELLD_FLEET_URL || "").replace(/\/$/, "");

// The trace: the client's requests to the server (wrapped fetch) and the deliveries in.
const trace = [];
// A SIGTERM (app.stop()) ends the process normally, so that a profile the app was started
// with (BENCH_APP_NODE_ARGS="--cpu-prof …", lib/app.mjs) is written.
process.on("SIGTERM", () => process.exit(0));
const t0 = performance.timeOrigin;
const now = () => t0 + performance.now();
const realFetch = globalThis.fetch;
globalThis.fetch = async function tracedFetch(input, init) {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  if (!fleet || !url.startsWith(fleet)) return realFetch(input, init);
  const entry = { kind: "request", path: url.slice(fleet.length), start: now(), end: 0, status: 0 };
  const body = init?.body;
  if (typeof body === "string") {
    entry.bytes = body.length;
    const m = body.match(/"method"\s*:\s*"([^"]+)"/);
    if (m) entry.method = m[1];
    const r = body.match(/"(wrun_[0-9A-Za-z]+)"/);
    if (r) entry.runId = r[1];
    const e = body.match(/"eventType"\s*:\s*"([a-z_]+)"/);
    if (e) entry.eventType = e[1];
    const c = e && body.match(/"correlationId"\s*:\s*"([^"]+)"/);
    if (c) entry.correlationId = c[1];
  }
  if (!entry.runId) {
    const r = url.match(/wrun_[0-9A-Za-z]+/);
    if (r) entry.runId = r[0];
  }
  trace.push(entry);
  try {
    const res = await realFetch(input, init);
    entry.status = res.status;
    // applyEvent: whether the server applied the event (a refusal is a 200 with
    // {"ok":false,…}), read from a copy of the answer, not awaited (set soon after).
    if (res.ok && entry.path.endsWith("/applyEvent")) {
      res
        .clone()
        .text()
        .then((t) => {
          entry.ok = JSON.parse(t)?.ok === true;
          entry.okAt = Date.now(); // wall clock, comparable with the server's createdAt
        })
        .catch(() => (entry.ok = false));
    }
    return res;
  } finally {
    entry.end = now();
  }
};

const worldModule = process.env.WORLD_MODULE;
if (!worldModule) throw new Error("WORLD_MODULE is not set");
const { setWorld, getWorld } = await import("workflow/runtime");
const { start, getRun } = await import("workflow/api");
const { hydrateWorkflowReturnValue } = await import("@workflow/core/serialization");
const { POST: flow } = await import("./dist/.well-known/workflow/v1/flow.mjs");
let world;
const TERMINAL = new Set(["run_completed", "run_failed", "run_cancelled"]);

function json(res, status, value) {
  const text = JSON.stringify(value, (_k, v) => (v instanceof Uint8Array ? { __bytes: Buffer.from(v).toString("base64") } : v));
  res.writeHead(status, { "content-type": "application/json" });
  res.end(text);
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks);
}

/** One delivery to the runtime's handler, traced; resolves with the status answered. */
async function deliver(req, res, path) {
  const body = await readBody(req);
  const entry = { kind: "delivery", path, start: now(), end: 0, status: 0 };
  const r = body.toString("utf8").match(/"(wrun_[0-9A-Za-z]+)"/);
  if (r) entry.runId = r[1];
  entry.messageId = req.headers["x-vqs-message-id"];
  entry.attempt = Number(req.headers["x-vqs-message-attempt"]);
  trace.push(entry);
  try {
    const request = new Request(`http://localhost${req.url}`, { method: "POST", headers: req.headers, body });
    const response = await flow(request);
    entry.status = response.status;
    await toWebResponse(res, response);
    return response.status;
  } finally {
    entry.end = now();
  }
}

async function toWebResponse(res, response) {
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body) {
    for await (const chunk of response.body) res.write(chunk);
  }
  res.end();
}

// The deliveries as the app sees them (GET /deliveries): counting costs an increment and a
// push per delivery, in the process that serves it.
const deliveryLimit = Number(process.env.BENCH_DELIVERY_LIMIT) || Infinity;
const counting = process.env.BENCH_COUNT_DELIVERIES !== "0";
const deliveries = { open: 0, peak: 0, accepted: 0, refused: 0, failed: 0, statuses: {}, deliveries: [] };
function resetDeliveries() {
  deliveries.peak = deliveries.open;
  deliveries.accepted = deliveries.refused = deliveries.failed = 0;
  deliveries.statuses = {};
  deliveries.deliveries = [];
}

const server = createServer(async (req, res) => {
  try {
    const url = new URL(req.url, "http://localhost");
    const path = url.pathname;
    if (req.method === "POST" && path.startsWith("/.well-known/workflow/v1/")) {
      if (!counting) {
        await deliver(req, res, path);
        return;
      }
      if (deliveries.open >= deliveryLimit) {
        deliveries.refused++;
        deliveries.statuses[429] = (deliveries.statuses[429] || 0) + 1;
        req.resume();
        res.writeHead(429, { "retry-after": "1", "content-type": "application/json" });
        res.end('{"error":"busy"}');
        return;
      }
      const counted = { messageId: req.headers["x-vqs-message-id"], attempt: Number(req.headers["x-vqs-message-attempt"]), at: Date.now(), answeredAt: 0, status: 0 };
      deliveries.open++;
      deliveries.peak = Math.max(deliveries.peak, deliveries.open);
      deliveries.accepted++;
      deliveries.deliveries.push(counted);
      let status = 500;
      try {
        status = await deliver(req, res, path);
      } finally {
        deliveries.open--;
        counted.status = status;
        counted.answeredAt = Date.now();
        deliveries.statuses[status] = (deliveries.statuses[status] || 0) + 1;
        if (!(status >= 200 && status < 300)) deliveries.failed++;
      }
      return;
    }
    if (req.method === "GET" && path === "/deliveries") return json(res, 200, deliveries);
    if (req.method === "POST" && path === "/deliveries/reset") {
      resetDeliveries();
      return json(res, 200, {});
    }
    if (req.method === "POST" && path === "/start") {
      const { file, workflow, args = [] } = JSON.parse((await readBody(req)).toString("utf8"));
      const entry = manifest.workflows[file]?.[workflow];
      if (!entry) return json(res, 404, { error: `no workflow ${file}#${workflow}` });
      const clientStart = Date.now(); // the app's clock right before start() (the DevKit bench's anchor)
      const run = await start(entry, args);
      return json(res, 200, { runId: run.runId, clientStart });
    }
    let m = path.match(/^\/runs\/([^/]+)\/settled$/);
    if (req.method === "GET" && m) {
      const runId = decodeURIComponent(m[1]);
      const quietMs = Number(url.searchParams.get("quietMs") ?? 15);
      const deadline = now() + Number(url.searchParams.get("timeoutMs") ?? 60_000);
      for (;;) {
        let terminal = false;
        let open = false;
        let last = 0;
        for (const e of trace) {
          if (e.end === 0) open = true;
          else if (e.runId === runId && TERMINAL.has(e.eventType) && e.status >= 200 && e.status < 300) terminal = true;
          last = Math.max(last, e.start, e.end);
        }
        if (terminal && !open && now() - last >= quietMs) return json(res, 200, { runId, lastActivity: last });
        if (now() > deadline) return json(res, 504, { runId, terminal, open, entries: trace.length });
        await new Promise((r) => setTimeout(r, 2));
      }
    }
    m = path.match(/^\/runs\/([^/]+)$/);
    if (req.method === "GET" && m) return json(res, 200, await (await getWorld()).runs.get(m[1]));
    m = path.match(/^\/runs\/([^/]+)\/output$/);
    if (req.method === "GET" && m) {
      const run = await (await getWorld()).runs.get(m[1]);
      if (run.status !== "completed") return json(res, 409, { status: run.status, error: run.error });
      return json(res, 200, { output: await hydrateWorkflowReturnValue(run.output, run.runId, undefined) });
    }
    m = path.match(/^\/runs\/([^/]+)\/events$/);
    if (req.method === "GET" && m) {
      const events = [];
      let cursor;
      do {
        const page = await (await getWorld()).events.list({ runId: m[1], pagination: { limit: 1000, sortOrder: "asc", cursor }, resolveData: "none" });
        events.push(...page.data);
        cursor = page.hasMore ? page.cursor : undefined;
      } while (cursor);
      return json(res, 200, events);
    }
    m = path.match(/^\/runs\/([^/]+)\/readable$/);
    if (req.method === "GET" && m) return toWebResponse(res, new Response(getRun(m[1]).getReadable()));
    if (req.method === "GET" && path === "/trace") return json(res, 200, trace);
    if (req.method === "GET" && path === "/executions") return json(res, 200, globalThis.__stepExecutions || []);
    if (req.method === "POST" && path === "/trace/reset") {
      trace.length = 0;
      return json(res, 200, {});
    }
    json(res, 404, { error: "not found" });
  } catch (err) {
    if (!res.headersSent) json(res, 500, { error: String(err?.stack || err) });
    else res.end();
  }
});

server.listen(Number(process.env.PORT) || 0, "127.0.0.1", async () => {
  const { port } = server.address();
  // Deliveries come back to this port: the client's base URL is http://localhost:$PORT
  // unless WORKFLOW_BASE_URL says otherwise; the world is made once the port is known.
  process.env.PORT = String(port);
  if (process.env.WORKFLOW_BASE_URL === "self") process.env.WORKFLOW_BASE_URL = `http://127.0.0.1:${port}`;
  world = await (await import(worldModule)).createWorld();
  setWorld(world);
  if (world.start) await world.start();
  console.log(JSON.stringify({ listening: port }));
});
