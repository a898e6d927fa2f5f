// The platform behaviour the queue's alarms rely on, checked on this repository's workerd
// with small Durable Objects of their own:
// - the heartbeat (src/queue/delivery.rs `HEARTBEAT_MS`): an alarm that a running alarm
//   handler sets (the delivery loop runs inside its alarm handler) survives the runtime
//   dying mid-handler and fires on time after the restart, twice in a row — so a successor
//   is woken by it with no call at all (SIGKILLing only the workerd this test started);
// - why no alarm is written at or before now (src/store/alarm.rs `AlarmChange::as_written`):
//   an alarm a handler sets to a time after its own scheduled time always fires, while one
//   set at or before it is often lost (storage keeps it, it never fires).

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

const HANDLER_SETS = `
import { DurableObject } from "cloudflare:workers";
export class Again extends DurableObject {
  async start(mode) {
    const t0 = Date.now() + 300;
    this.ctx.storage.put({ t0, mode });
    await this.ctx.storage.setAlarm(t0);
  }
  async seen() {
    return { runs: (await this.ctx.storage.get("runs")) ?? 0, late: (await this.ctx.storage.get("late")) ?? null, alarm: await this.ctx.storage.getAlarm() };
  }
  async alarm() {
    const runs = ((await this.ctx.storage.get("runs")) ?? 0) + 1;
    this.ctx.storage.put("runs", runs);
    if (runs > 1) return;
    const t0 = await this.ctx.storage.get("t0");
    const mode = await this.ctx.storage.get("mode");
    // How late the handler runs by its own clock (never before its scheduled time).
    this.ctx.storage.put("late", Date.now() - t0);
    const at = { scheduled: t0, before: t0 - 50, "now+1": Date.now() + 1, "scheduled+1": t0 + 1 }[mode];
    await this.ctx.storage.setAlarm(at);
  }
}
export default { async fetch() { return new Response("again"); } };
`;

test("platform: an alarm a handler sets after its own scheduled time fires; at or before it, it is often lost", { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "celld-again-"));
  const { compatibilityDate } = readWranglerConfig();
  const mf = new Miniflare({ modules: true, script: HANDLER_SETS, compatibilityDate, durableObjects: { AGAIN: { className: "Again", useSQLite: true } }, durableObjectsPersist: dir });
  try {
    const ns = await mf.getDurableObjectNamespace("AGAIN");
    const modes = ["now+1", "scheduled+1", "scheduled", "before"];
    const objects = [];
    for (let i = 0; i < 10; i++) {
      for (const mode of modes) {
        const stub = ns.getByName(`${mode}#${i}`);
        await stub.start(mode);
        objects.push({ mode, stub });
      }
    }
    await sleep(2500);
    const fired = Object.fromEntries(modes.map((m) => [m, 0]));
    for (const { mode, stub } of objects) {
      const seen = await stub.seen();
      assert.ok(seen.late >= 0, `a handler's Date.now() is at or after its scheduled time: ${JSON.stringify(seen)}`);
      if (seen.runs >= 2) fired[mode] += 1;
    }
    // What the shell writes (now + 1 at the latest, after the handler's scheduled time) fires.
    assert.equal(fired["now+1"], 10, JSON.stringify(fired));
    assert.equal(fired["scheduled+1"], 10, JSON.stringify(fired));
    // Measured 2026-12-07 on workerd 1.20260426.1: 0 to 7 of 10 fired for each, varying
    // with the machine's load (not asserted: a workerd that fixes it needs no change here).
    t.diagnostic(`fired of 10 each: ${JSON.stringify(fired)}`);
  } finally {
    await mf.dispose().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
});
