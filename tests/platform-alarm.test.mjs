// The platform behaviour the queue's heartbeat relies on (src/queue/delivery.rs
// `HEARTBEAT_MS`): an alarm that a running alarm handler sets (the delivery loop runs
// inside its alarm handler) survives the runtime dying mid-handler and fires on time after
// the restart, twice in a row — so a successor is woken by it with no call at all.
// Checked on this repository's workerd with a small Durable Object of its own, SIGKILLing
// the workerd this test started (only its own child processes).

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { readWranglerConfig } from "./lib/harness.mjs";

const SCRIPT = `
import { DurableObject } from "cloudflare:workers";
export class Beat extends DurableObject {
  async start() {
    await this.ctx.storage.setAlarm(Date.now());
    return "ok";
  }
  async seen() {
    return { runs: (await this.ctx.storage.get("runs")) ?? 0, last: (await this.ctx.storage.get("at:3")) ?? null };
  }
  async alarm() {
    const runs = ((await this.ctx.storage.get("runs")) ?? 0) + 1;
    await this.ctx.storage.put("runs", runs);
    await this.ctx.storage.put("at:" + runs, Date.now());
    if (runs <= 2) {
      // A loop's beat, then a long delivery: the runtime is killed meanwhile.
      await this.ctx.storage.setAlarm(Date.now() + 1000);
      await new Promise((resolve) => setTimeout(resolve, 60_000));
    }
  }
}
export default { async fetch() { return new Response("beat"); } };
`;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** The processes this test process started (Miniflare's workerd), never anyone else's. */
const children = () => {
  try {
    return execFileSync("pgrep", ["-P", String(process.pid)], { encoding: "utf8" }).trim().split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
};

test("platform: an alarm set by a running alarm handler fires after the runtime dies mid-handler, twice in a row", { timeout: 90_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "celld-beat-"));
  const { compatibilityDate } = readWranglerConfig();
  const options = { modules: true, script: SCRIPT, compatibilityDate, durableObjects: { BEAT: { className: "Beat", useSQLite: true } }, durableObjectsPersist: dir };
  const stub = async (mf) => (await mf.getDurableObjectNamespace("BEAT")).getByName("one");
  const kill = async (mf) => {
    const pids = children();
    assert.ok(pids.length > 0, "a workerd to kill");
    for (const pid of pids) process.kill(pid, "SIGKILL");
    await mf.dispose().catch(() => {});
  };
  let mf = new Miniflare(options);
  try {
    await (await stub(mf)).start();
    await sleep(700); // the first run is inside its handler, its beat set
    assert.equal((await (await stub(mf)).seen()).runs, 1);
    await kill(mf);
    mf = new Miniflare(options);
    await mf.ready;
    await sleep(2500); // the beat fires by itself: the second run, killed mid-handler too
    await kill(mf);
    mf = new Miniflare(options);
    await mf.ready;
    await sleep(2500); // no call meanwhile
    const askedAt = Date.now();
    const seen = await (await stub(mf)).seen();
    // Three runs: the second can only have run in the second life (a handler runs alone,
    // and the second one waits a minute), the third before this call asked.
    assert.equal(seen.runs, 3, `each restart's alarm fired with no call: ${JSON.stringify(seen)}`);
    assert.ok(seen.last < askedAt - 500, `the third run came by itself: ${JSON.stringify(seen)}, asked at ${askedAt}`);
  } finally {
    await mf.dispose().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
});
