// A scriptable delivery target for QueueDO tests: an HTTP server on a free local port that
// records every delivery and answers according to a policy.
//
//   const target = await startQueueTarget((d) => ({ status: 200 }));
//   target.url            base URL to put in the enqueue request's config.targetBaseUrl
//   target.deliveries     [{id, attempt, n, method, path, headers, body, at, status}]
//   await target.waitUntil(() => target.deliveries.length >= 3, 5000)
//
// The policy receives {id, attempt, n (occurrence of this id+attempt), path, headers, body}
// and returns {status, body?, contentType?, headers?, delayMs?}.

import http from "node:http";

export async function startQueueTarget(policy = () => ({ status: 200 }), { host = "127.0.0.1", port = 0 } = {}) {
  const deliveries = [];
  const seen = new Map();
  const waiters = new Set();
  const sockets = new Set();
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const id = req.headers["x-vqs-message-id"] ?? null;
      const attempt = req.headers["x-vqs-message-attempt"] ?? null;
      const pair = `${id}\u0000${attempt}`;
      const n = (seen.get(pair) || 0) + 1;
      seen.set(pair, n);
      const d = {
        id,
        attempt,
        n,
        method: req.method,
        path: req.url,
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        at: Date.now(),
        status: null,
      };
      let answer;
      try {
        answer = (await policy(d)) || { status: 200 };
      } catch {
        answer = { status: 500, body: "policy threw" };
      }
      if (answer.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
      d.status = answer.status;
      d.answeredAt = Date.now();
      deliveries.push(d);
      const headers = { ...(answer.headers || {}) };
      headers["content-type"] = answer.contentType ?? "application/json";
      const body = answer.body ?? (answer.status >= 200 && answer.status < 300 ? '{"ok":true}' : "");
      try {
        res.writeHead(answer.status, headers);
        res.end(body);
      } catch {
        // the worker gave up on this request (timeout); nothing to answer
      }
      for (const w of [...waiters]) w();
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    deliveries,
    /** Resolves true once `cond()` holds (checked on every delivery and every 50 ms), false on timeout. */
    waitUntil(cond, timeoutMs = 10000) {
      if (cond()) return Promise.resolve(true);
      return new Promise((resolve) => {
        const check = () => {
          if (cond()) done(true);
        };
        const tick = setInterval(check, 50);
        const timer = setTimeout(() => done(false), timeoutMs);
        const done = (v) => {
          clearTimeout(timer);
          clearInterval(tick);
          waiters.delete(check);
          resolve(v);
        };
        waiters.add(check);
      });
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

// The client's shard choice lives with the client model; re-exported for scripts/bench.
export { shardOf } from "./world-client.mjs";

/** An enqueue request as the reference client builds it. */
export function enqueueRequest(messageId, targetBaseUrl, { body, runId, idempotencyKey, delaySeconds, queueShards = 1, queueName = "__wkf_workflow_test" } = {}) {
  const req = {
    messageId,
    queueName,
    pathname: "flow",
    body: body ?? JSON.stringify({ messageId }),
    config: { targetBaseUrl, queueShards },
  };
  if (runId !== undefined) req.runId = runId;
  if (idempotencyKey !== undefined) req.idempotencyKey = idempotencyKey;
  if (delaySeconds !== undefined) req.delaySeconds = delaySeconds;
  return req;
}

/** Run `fn(i)` for i in 0..n with at most `concurrency` in flight; resolves with the results. */
export async function pool(n, concurrency, fn) {
  const out = new Array(n);
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      out[i] = await fn(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  return out;
}
