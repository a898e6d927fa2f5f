// The golden callback server (shared/golden/README.md §5.2): receives the QueueDO's deliveries
// on 127.0.0.1:18999, answers each with the recorded response for its key
// (x-vqs-message-id, x-vqs-message-attempt, occurrence n), and stores it.

import http from "node:http";

export const CALLBACK_HEADERS = [
  "content-type",
  "x-vqs-queue-name",
  "x-vqs-message-id",
  "x-vqs-message-attempt",
  "x-workflow-callback-secret",
];

export const deliveryKey = (id, attempt, n) => `${id}\u0000${attempt}\u0000${n}`;

/**
 * answers: Map key -> {status, contentType, headers?, body}. Unknown keys get 200 {"ok":true}
 * and are flagged `unexpected`.
 */
export async function startCallbackServer({
  host = "127.0.0.1",
  port = 18999,
  answers = new Map(),
  busyWaitMs = Number(process.env.GOLDEN_PORT_WAIT_MS || 180000),
} = {}) {
  const deliveries = []; // {key, method, path, headers, body, unexpected, matched, at}
  const seen = new Map(); // id\0attempt -> count
  const waiters = new Set();

  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const headers = {};
      for (const h of CALLBACK_HEADERS) headers[h] = req.headers[h] ?? null;
      const pair = `${headers["x-vqs-message-id"]}\u0000${headers["x-vqs-message-attempt"]}`;
      const n = (seen.get(pair) || 0) + 1;
      seen.set(pair, n);
      const key = deliveryKey(headers["x-vqs-message-id"], headers["x-vqs-message-attempt"], n);
      const answer = answers.get(key);
      const d = {
        key,
        method: req.method,
        path: req.url,
        headers,
        body: Buffer.concat(chunks).toString("utf8"),
        unexpected: !answer,
        matched: false,
        at: Date.now(),
      };
      deliveries.push(d);
      const a = answer || { status: 200, contentType: "application/json", body: '{"ok":true}' };
      const out = { ...(a.headers || {}) };
      if (a.contentType != null) out["content-type"] = a.contentType;
      res.writeHead(a.status, out);
      res.end(a.body ?? "");
      for (const w of [...waiters]) w();
    });
  });
  // The port is fixed by the transcripts; if another replay holds it, wait for it to be free.
  const deadline = Date.now() + busyWaitMs;
  for (;;) {
    try {
      await new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve();
        });
      });
      break;
    } catch (err) {
      if (err.code !== "EADDRINUSE" || Date.now() > deadline) {
        throw new Error(`callback server cannot listen on ${host}:${port}: ${err.message}`);
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  return {
    port: server.address().port,
    deliveries,
    /** Waits until a delivery with this key has arrived; resolves it or null on timeout. */
    waitFor(key, timeoutMs) {
      const find = () => deliveries.find((d) => d.key === key);
      const found = find();
      if (found) return Promise.resolve(found);
      return new Promise((resolve) => {
        const check = () => {
          const d = find();
          if (d) done(d);
        };
        const timer = setTimeout(() => done(null), timeoutMs);
        const done = (d) => {
          clearTimeout(timer);
          waiters.delete(check);
          resolve(d);
        };
        waiters.add(check);
      });
    },
    async close() {
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
