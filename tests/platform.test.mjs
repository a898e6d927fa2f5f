// The platform behaviour the buffered writes rely on (src/store/buffered.rs,
// src/shell/kv.rs `run_sync`, entry.mjs `syncCall`), checked on this repository's workerd
// with a small Durable Object of its own:
// * every write of one synchronous stretch of code commits together, with no transaction
//   opened, and an alarm set in the same stretch joins them;
// * `ctx.abort()` discards the writes of the stretch that have not committed yet, fails the
//   call, and the next call gets a fresh object that sees none of them.
// * a row over the platform's size limit fails its own `put` (so a write the buffered path
//   admits, under `DIRECT_ROW_LIMIT`, cannot fail for size).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Miniflare } from "miniflare";
import { readWranglerConfig } from "./lib/harness.mjs";

const SCRIPT = `
import { DurableObject } from "cloudflare:workers";
export class Probe extends DurableObject {
  burst(prefix, n) {
    for (let i = 0; i < n; i++) this.ctx.storage.kv.put(prefix + i, "v" + i);
    this.ctx.storage.setAlarm(Date.now() + 3_600_000);
    return "done";
  }
  burstThenAbort(prefix) {
    this.ctx.storage.kv.put(prefix + "0", "v");
    this.ctx.storage.kv.put(prefix + "1", "v");
    this.ctx.abort("storage failed while writing");
    return "not reached";
  }
  read(prefix, n) {
    const out = [];
    for (let i = 0; i < n; i++) out.push(this.ctx.storage.kv.get(prefix + i) ?? null);
    return out;
  }
  async alarmSet() {
    return (await this.ctx.storage.getAlarm()) !== null;
  }
  put(key, size) {
    try {
      this.ctx.storage.kv.put(key, new Uint8Array(size));
      return "ok";
    } catch (e) {
      return e.message;
    }
  }
  async alarm() {}
}
export default {
  async fetch(request, env) {
    const stub = () => env.PROBE.getByName("one");
    const seen = {};
    seen.burst = await stub().burst("a:", 5);
    seen.burstRead = await stub().read("a:", 5);
    seen.alarmSet = await stub().alarmSet();
    try {
      seen.aborted = await stub().burstThenAbort("b:");
    } catch (e) {
      seen.aborted = "threw: " + e.message;
    }
    seen.abortedRead = await stub().read("b:", 2);
    seen.earlierRead = await stub().read("a:", 1);
    seen.putUnderLimit = await stub().put("k", 2_000_000);
    seen.putOverLimit = await stub().put("k".repeat(100), 2_199_961);
    return Response.json(seen);
  },
};
`;

test("platform: a synchronous burst commits together; ctx.abort() discards an uncommitted one; oversized rows fail their put", async () => {
  const { compatibilityDate } = readWranglerConfig();
  const mf = new Miniflare({
    modules: true,
    script: SCRIPT,
    compatibilityDate,
    durableObjects: { PROBE: { className: "Probe", useSQLite: true } },
  });
  try {
    const seen = await (await mf.dispatchFetch("http://probe/")).json();
    assert.equal(seen.burst, "done");
    assert.deepEqual(seen.burstRead, ["v0", "v1", "v2", "v3", "v4"]);
    assert.equal(seen.alarmSet, true);
    assert.equal(seen.aborted, "threw: storage failed while writing");
    assert.deepEqual(seen.abortedRead, [null, null], "the aborted burst left nothing");
    assert.deepEqual(seen.earlierRead, ["v0"], "earlier commits stay");
    assert.equal(seen.putUnderLimit, "ok");
    assert.match(seen.putOverLimit, /SQLITE_TOOBIG/);
  } finally {
    await mf.dispose();
  }
});
