#!/usr/bin/env node
// npm run dev: serve the worker locally with wrangler dev on http://127.0.0.1:8787.
// Durable Object state is kept in .wrangler/state. Secrets come from .dev.vars, which is
// created from .dev.vars.example (WORLD_SECRET=dev-secret) when missing.
// Extra arguments are passed to wrangler, e.g. `npm run dev -- --port 9000`.

import { spawn } from "node:child_process";
import { copyFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { ROOT } from "./lib/tools.mjs";

const devVars = join(ROOT, ".dev.vars");
const example = join(ROOT, ".dev.vars.example");
if (!existsSync(devVars) && existsSync(example)) {
  copyFileSync(example, devVars);
  console.log("[dev] created .dev.vars from .dev.vars.example (WORLD_SECRET=dev-secret)");
}

const require = createRequire(join(ROOT, "package.json"));
const wrangler = join(dirname(require.resolve("wrangler/package.json")), "bin", "wrangler.js");
const extra = process.argv.slice(2);
const has = (f) => extra.some((a) => a === f || a.startsWith(`${f}=`));
const args = [wrangler, "dev"];
if (!has("--ip")) args.push("--ip", "127.0.0.1");
if (!has("--port")) args.push("--port", "8787");
if (!has("--persist-to")) args.push("--persist-to", join(ROOT, ".wrangler", "state"));
args.push(...extra);
const port = extra.find((a) => a.startsWith("--port="))?.slice(7) ?? (has("--port") ? extra[extra.indexOf("--port") + 1] : "8787");
console.log(`[dev] the queue console: http://127.0.0.1:${port}/console (secret: WORLD_SECRET of .dev.vars)`);

const child = spawn(process.execPath, args, {
  cwd: ROOT,
  stdio: "inherit",
  env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
});
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
