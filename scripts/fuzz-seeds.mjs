#!/usr/bin/env node
// Seed corpus for the fuzz targets, from the golden transcripts (../shared/golden, or
// GOLDEN_DIR): writes fuzz/corpus/<target>/seed-<hash> files, replacing earlier seeds.
//
//  * router: every recorded request (method, path, authorization, body) in the router
//    target's input layout (fuzz/fuzz_targets/router.rs);
//  * codec: every distinct request and response body;
//  * run, stream, index, queue: the calls of each golden file to one Durable Object
//    instance, in order, as raw-call operations (fuzz/src/lib.rs: tag 0x00, method index
//    in the binding's whitelist, 2-byte big-endian length, body, clock byte), at most
//    MAX_OPS calls per seed;
//  * shards: per golden file, its `/v1/index/*` requests (../shared/golden-0.4, or
//    GOLDEN_040_DIR) as raw coordinator operations, their run ids renamed to the target's
//    pool (wrun_A, wrun_B, wrun_C) and made active first, and its 0.3 `index` calls
//    (../shared/golden) as raw facade operations (fuzz/fuzz_targets/shards.rs).
//
// Usage: node scripts/fuzz-seeds.mjs [target ...]

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const GOLDEN = process.env.GOLDEN_DIR ? resolve(process.env.GOLDEN_DIR) : resolve(ROOT, "..", "shared", "golden");
const GOLDEN_040 = process.env.GOLDEN_040_DIR ? resolve(process.env.GOLDEN_040_DIR) : resolve(ROOT, "..", "shared", "golden-0.4");
const CORPUS = join(ROOT, "fuzz", "corpus");
const MAX_OPS = 24;
const MAX_BODY = 16 * 1024;
const BINDING_TARGETS = { runs: "run", streams: "stream", index: "index", queue: "queue" };
export const TARGETS = ["router", "codec", "run", "stream", "index", "queue", "shards"];
/** The coordinator operations in the order of `IndexOp::ALL` (src/wire/router.rs). */
const INDEX_OPS = ["runs/list", "runs/commit", "runs/expire", "hooks/reserve", "hooks/finalize", "hooks/release-reservation", "hooks/release"];
/** The shards target's run pool (`RUNS`), in order. */
const SHARD_RUNS = ["wrun_A", "wrun_B", "wrun_C"];

/** Each binding's method whitelist, in the order of `Binding::methods()` (router.rs): an
 * inline list there (today), or a core's `METHODS` constant it names (`&crate::stream::METHODS`). */
function whitelists() {
  const src = readFileSync(join(ROOT, "src", "wire", "router.rs"), "utf8");
  const fn = src.slice(src.indexOf("pub fn methods(self)"));
  const names = (text) => [...text.matchAll(/"([^"]+)"/g)].map((x) => x[1]);
  const out = {};
  for (const [variant, key] of [["Runs", "runs"], ["Streams", "streams"], ["Index", "index"], ["Queue", "queue"]]) {
    const inline = fn.match(new RegExp(`Binding::${variant} => &\\[([^\\]]*)\\]`));
    const named = fn.match(new RegExp(`Binding::${variant} => &crate::(\\w+)::METHODS`));
    if (inline) {
      out[key] = names(inline[1]);
    } else if (named) {
      const core = readFileSync(join(ROOT, "src", named[1], "mod.rs"), "utf8");
      const m = core.match(/pub const METHODS: \[&str; \d+\] =\s*\[([^\]]*)\]/);
      if (!m) throw new Error(`cannot find METHODS in src/${named[1]}/mod.rs`);
      out[key] = names(m[1]);
    } else {
      throw new Error(`cannot find the ${variant} whitelist in src/wire/router.rs`);
    }
  }
  return out;
}

function requests(dir = GOLDEN) {
  const out = [];
  if (!existsSync(dir)) return out;
  const files = readdirSync(dir).filter((f) => f.endsWith(".jsonl")).sort();
  for (const file of files) {
    const lines = readFileSync(join(dir, file), "utf8").split("\n").filter((l) => l.trim() !== "");
    const rows = lines.map((l) => JSON.parse(l)).filter((r) => r.request).sort((a, b) => a.seq - b.seq);
    for (const r of rows) {
      const q = r.request;
      let body;
      if (q.bodySynthetic) continue; // generated large bodies: not useful seeds
      else if (q.bodyBase64 !== undefined) body = Buffer.from(q.bodyBase64, "base64");
      else body = Buffer.from(q.body ?? "", "utf8");
      out.push({ file, method: q.method, path: q.path, authorization: q.authorization, body, response: r.response?.body });
    }
  }
  return out;
}

function u16(n) {
  return Buffer.from([(n >> 8) & 0xff, n & 0xff]);
}

function routerInput(req) {
  const method = req.method === "POST" ? Buffer.from([0]) : req.method === "GET" ? Buffer.from([4]) : Buffer.concat([Buffer.from([7, Buffer.byteLength(req.method)]), Buffer.from(req.method)]);
  const path = Buffer.from(req.path, "utf8");
  const auth = req.authorization == null ? Buffer.from([0]) : Buffer.concat([Buffer.from([1, Math.min(255, Buffer.byteLength(req.authorization))]), Buffer.from(req.authorization).subarray(0, 255)]);
  return Buffer.concat([method, u16(path.length), path, auth, Buffer.from([2]), Buffer.from([0]), req.body.subarray(0, MAX_BODY)]);
}

function rpcParts(path) {
  const seg = path.split("/").filter((s) => s !== "");
  if (seg.length !== 5 || seg[0] !== "v1" || seg[1] !== "rpc") return null;
  return { binding: seg[2], name: seg[3], method: seg[4] };
}

function write(dir, bytes, written) {
  const name = `seed-${createHash("sha1").update(bytes).digest("hex").slice(0, 16)}`;
  if (written.has(name)) return;
  written.add(name);
  writeFileSync(join(dir, name), bytes);
}

/** The shards target's seeds: per golden file, the 0.4 coordinator requests (run ids
 * renamed into the pool and made active first: tag 0xD0 + 4 × run, status 0 = active) and
 * the 0.3 `index` calls (tag 0x21: with the archive read-through), each op followed by a
 * clock byte. */
function shardSeeds(reqs03, indexMethods) {
  const perFile = new Map();
  const push = (file, op) => {
    if (!perFile.has(file)) perFile.set(file, []);
    perFile.get(file).push(op);
  };
  for (const r of requests(GOLDEN_040)) {
    const m = r.path.match(/^\/v1\/index\/([^/]+\/[^/]+)$/);
    const op = m ? INDEX_OPS.indexOf(m[1]) : -1;
    if (op < 0 || r.method !== "POST" || r.body.length > 0xffff) continue;
    push(`040/${r.file}`, { body: r.body.toString("utf8"), head: Buffer.from([op]), tail: Buffer.from([0, 3]) });
  }
  for (const r of reqs03) {
    const p = rpcParts(r.path);
    const index = p && p.binding === "index" ? indexMethods.indexOf(p.method) : -1;
    if (index < 0 || r.method !== "POST" || r.body.length > 0xffff) continue;
    push(`030/${r.file}`, { body: r.body.toString("utf8"), head: Buffer.from([0x21, index]), tail: Buffer.from([3]) });
  }
  const out = [];
  for (const ops of perFile.values()) {
    const runs = [];
    for (const op of ops) for (const id of op.body.match(/wrun_[A-Za-z0-9_]+/g) ?? []) if (!runs.includes(id)) runs.push(id);
    // Longest ids first, so that no id is renamed inside a longer one.
    const renames = runs.slice(0, SHARD_RUNS.length).map((id, i) => [id, SHARD_RUNS[i]]).sort((a, b) => b[0].length - a[0].length);
    const start = SHARD_RUNS.map((_, i) => Buffer.from([0xd0 + 4 * i, 3]));
    const encoded = ops.map((op) => {
      let body = op.body;
      for (const [from, to] of renames) body = body.split(from).join(to);
      const bytes = Buffer.from(body, "utf8");
      return Buffer.concat([op.head, u16(bytes.length), bytes, op.tail]);
    });
    for (let i = 0; i < encoded.length; i += MAX_OPS) out.push(Buffer.concat([...start, ...encoded.slice(i, i + MAX_OPS)]));
  }
  return out;
}

function main() {
  if (!existsSync(GOLDEN)) {
    console.error(`[fuzz-seeds] no golden files at ${GOLDEN} (set GOLDEN_DIR)`);
    process.exit(1);
  }
  const wanted = process.argv.slice(2).length ? process.argv.slice(2) : TARGETS;
  const lists = whitelists();
  const reqs = requests();
  const seeds = Object.fromEntries(TARGETS.map((t) => [t, []]));

  for (const r of reqs) seeds.router.push(routerInput(r));
  for (const r of reqs) {
    if (r.body.length > 0 && r.body.length <= MAX_BODY) seeds.codec.push(r.body);
    if (typeof r.response === "string" && r.response.length > 0 && r.response.length <= MAX_BODY) seeds.codec.push(Buffer.from(r.response));
  }

  // Calls to one instance of one binding, per golden file, in order.
  const groups = new Map();
  for (const r of reqs) {
    const p = rpcParts(r.path);
    if (!p || !Object.hasOwn(BINDING_TARGETS, p.binding) || r.method !== "POST") continue;
    const index = lists[p.binding].indexOf(p.method);
    if (index < 0 || r.body.length > 0xffff) continue;
    let body = r.body;
    if (p.binding === "runs") {
      // The run target's instance is wrun_A: make the recorded run ids match it.
      let name = p.name;
      try {
        name = decodeURIComponent(p.name);
      } catch {
        // a malformed name (a router-error row): keep the ids as they are
      }
      body = Buffer.from(body.toString("utf8").split(JSON.stringify(name)).join('"wrun_A"'));
    }
    const key = `${r.file}|${p.binding}|${p.name}`;
    if (!groups.has(key)) groups.set(key, { target: BINDING_TARGETS[p.binding], ops: [] });
    groups.get(key).ops.push(Buffer.concat([Buffer.from([0, index]), u16(body.length), body, Buffer.from([3])]));
  }
  for (const { target, ops } of groups.values()) {
    for (let i = 0; i < ops.length; i += MAX_OPS) seeds[target].push(Buffer.concat(ops.slice(i, i + MAX_OPS)));
  }
  seeds.shards.push(...shardSeeds(reqs, lists.index));

  for (const target of wanted) {
    if (!seeds[target]) throw new Error(`unknown target ${target}`);
    const dir = join(CORPUS, target);
    mkdirSync(dir, { recursive: true });
    // Generated seeds are replaced; hand-kept regression inputs (`seed-regress-*`) stay.
    for (const f of readdirSync(dir)) if (f.startsWith("seed-") && !f.startsWith("seed-regress-")) rmSync(join(dir, f));
    const written = new Set();
    for (const s of seeds[target]) write(dir, s, written);
    console.log(`[fuzz-seeds] ${target}: ${written.size} seeds in fuzz/corpus/${target}`);
  }
}

main();
