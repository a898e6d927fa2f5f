// The lock that keeps two test files (npm test runs two at once) from installing a profile or
// building one app in the same directory at the same moment (tests/conformance/lib/profile.mjs).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { withLock } from "./conformance/lib/profile.mjs";

const PROFILE = fileURLToPath(new URL("./conformance/lib/profile.mjs", import.meta.url));

test("withLock: three processes take the lock one at a time", async () => {
  const dir = mkdtempSync(join(tmpdir(), "profile-lock-"));
  const log = join(dir, "log");
  const program = `
    import { appendFileSync } from "node:fs";
    const { withLock } = await import(${JSON.stringify(PROFILE)});
    withLock(${JSON.stringify(join(dir, "x.lock"))}, () => {
      appendFileSync(${JSON.stringify(log)}, "in\\n");
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
      appendFileSync(${JSON.stringify(log)}, "out\\n");
    });`;
  const runs = [0, 1, 2].map(
    () =>
      new Promise((resolve) => {
        const child = spawn(process.execPath, ["--input-type=module", "-e", program], { stdio: "inherit" });
        child.on("exit", resolve);
      }),
  );
  assert.deepEqual(await Promise.all(runs), [0, 0, 0]);
  assert.equal(readFileSync(log, "utf8"), "in\nout\n".repeat(3));
  assert.equal(existsSync(join(dir, "x.lock")), false, "released");
  rmSync(dir, { recursive: true, force: true });
});

test("withLock: a lock left by a process that is gone is broken; fn's error releases it", () => {
  const dir = mkdtempSync(join(tmpdir(), "profile-lock-"));
  const lock = join(dir, "x.lock");
  mkdirSync(lock);
  writeFileSync(join(lock, "pid"), "2147483646"); // no such process
  assert.equal(withLock(lock, () => 7), 7);
  assert.throws(() => withLock(lock, () => { throw new Error("boom"); }), /boom/);
  assert.equal(existsSync(lock), false);
  rmSync(dir, { recursive: true, force: true });
});
