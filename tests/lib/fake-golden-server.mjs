// A stand-in server for testing the golden replayer itself, without the worker: it answers
// the exchanges of one transcript in order with the recorded responses, every server-clock
// token shifted by `shiftMs` (so the replayer must learn S and rewrite request bodies), and
// performs the recorded callback deliveries to the callback server after each exchange.
// A request that differs from what the replayer should send gets status 599 with an
// explanation, which the replayer reports as a mismatch.

import http from "node:http";
import { loadLines } from "./golden.mjs";
import { rewriteTokens, stringTokens } from "./normalize.mjs";

/** Shifts every in-window server-clock token of a text by shiftMs. */
export function shiftText(text, shiftMs) {
  const S = new Map();
  for (const t of stringTokens(text)) S.set(t.ms, t.ms + shiftMs);
  return rewriteTokens(text, S);
}

export async function startFakeGoldenServer(entry, { dir, shiftMs = 12345, mutate = null, callbackPort } = {}) {
  const lines = loadLines(dir, entry.file);
  const exchanges = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].request) continue;
    const after = [];
    for (let j = i + 1; j < lines.length && !lines[j].request; j++) if (lines[j].callback) after.push(lines[j].callback);
    exchanges.push({ line: lines[i], after });
  }
  let next = 0;
  // The replayer rewrites the recorded callback address to its callback server's; a real
  // server sees (and echoes) that address, so the fake does too.
  const address = (text) => (typeof text === "string" ? text.replaceAll("127.0.0.1:18999", `127.0.0.1:${callbackPort}`) : text);

  const deliver = async (cb) => {
    const headers = {};
    for (const [k, v] of Object.entries(cb.headers)) if (v !== null) headers[k] = v;
    await fetch(`http://127.0.0.1:${callbackPort}${cb.path}`, { method: cb.method, headers, body: cb.body }).catch(() => {});
  };

  const server = http.createServer((req, res) => {
    const chunks = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size <= 1 << 20) chunks.push(c);
    });
    req.on("end", () => {
      const ex = exchanges[next++];
      if (!ex) {
        res.writeHead(599, { "content-type": "text/plain" });
        return res.end("no more recorded exchanges");
      }
      const rec = ex.line.request;
      const problems = [];
      if (req.method !== rec.method) problems.push(`method ${req.method} != ${rec.method}`);
      if (req.url !== rec.path) problems.push(`path ${req.url} != ${rec.path}`);
      const hdr = (n) => (req.headers[n] === undefined ? null : req.headers[n]);
      // Node trims header values; compare trimmed.
      if (hdr("content-type") !== (rec.contentType === null ? null : rec.contentType.trim())) problems.push("content-type");
      if (hdr("authorization") !== (rec.authorization === null ? null : rec.authorization.trim())) problems.push("authorization");
      if ("body" in rec) {
        const want = address(shiftText(rec.body, shiftMs));
        const got = Buffer.concat(chunks).toString("utf8");
        if (got !== want) problems.push(`body ${JSON.stringify(got.slice(0, 200))} != ${JSON.stringify(want.slice(0, 200))}`);
      } else if ("bodySynthetic" in rec && size !== rec.bodySynthetic.length) {
        problems.push(`synthetic body of ${size} bytes, want ${rec.bodySynthetic.length}`);
      }
      if (problems.length) {
        res.writeHead(599, { "content-type": "text/plain" });
        return res.end(`seq ${ex.line.seq}: ${problems.join("; ")}`);
      }
      const resp = ex.line.response;
      let body = address(shiftText(resp.body, shiftMs));
      if (mutate) body = mutate(ex.line, body);
      const headers = {};
      if (resp.contentType !== null) headers["content-type"] = resp.contentType;
      res.writeHead(resp.status, headers);
      res.end(req.method === "HEAD" ? undefined : body, async () => {
        for (const cb of ex.after) await deliver(cb);
      });
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    host: "127.0.0.1",
    port: server.address().port,
    async dispose() {
      server.closeAllConnections?.();
      await new Promise((r) => server.close(() => r()));
    },
  };
}
