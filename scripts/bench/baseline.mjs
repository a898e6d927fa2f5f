// A baseline for the workflow bench (`npm run bench -- workflows --baseline REV`): another
// build of this worker, served beside the current one and the reference in the same run, so
// "no worse than before" is measured on one machine in one time window, not across days.
//
// REV is a git revision (a commit, tag or branch) or the path of a checkout that holds a
// built worker (`<dir>/build/index.js`). A revision is checked out once as a detached git
// worktree under target/baselines/<commit> (gitignored) and built there with this
// checkout's tools (its node_modules linked in; the worktree's own cargo target directory,
// so the current build's is never rebuilt), and reused afterwards.
//
// The baseline runs in its own deployment defaults: the [vars] of its wrangler.toml over
// the bench's defaults for ours (a build from before the delivery pace reads
// QUEUE_MAX_INFLIGHT=5 there, its fixed limit; the current build reads 128, its ceiling).
// Secrets stay the bench's.
//
// Owns: finding or making a baseline build and its variables. Must not know the bench's
// workloads or how servers are started.

import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, symlinkSync } from "node:fs";
import { join, resolve } from "node:path";
import { ROOT } from "../../tests/lib/harness.mjs";

const SECRET_VARS = new Set(["WORLD_SECRET", "WORKFLOW_CALLBACK_SECRET"]);

/** The string [vars] of a wrangler.toml's text (`NAME = "value"` lines up to the next table). */
export function wranglerVars(text) {
  const vars = {};
  const m = text.match(/^\s*\[vars\]\s*$([\s\S]*?)(?=^\s*\[|(?![\s\S]))/m);
  if (!m) return vars;
  for (const line of m[1].split("\n")) {
    const kv = line.match(/^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"]*)"\s*(#.*)?$/);
    if (kv && !SECRET_VARS.has(kv[1])) vars[kv[1]] = kv[2];
  }
  return vars;
}

function git(args, cwd = ROOT) {
  const r = spawnSync("git", args, { cwd, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout.trim();
}

/** A checkout directory with a build: its script, variables and commit. */
function fromCheckout(dir, label) {
  const script = join(dir, "build", "index.js");
  if (!existsSync(script)) throw new Error(`${script} is missing: build that checkout first (npm run build there)`);
  const toml = join(dir, "wrangler.toml");
  const vars = existsSync(toml) ? wranglerVars(readFileSync(toml, "utf8")) : {};
  let commit = null;
  try {
    commit = git(["rev-parse", "--short=12", "HEAD"], dir);
  } catch {
    // not a git checkout
  }
  return { label, script, vars, commit, dir };
}

/**
 * The baseline named by `rev` (a checkout path or a git revision); builds a revision's
 * worktree when it has no build yet. `log` gets progress lines.
 */
export function resolveBaseline(rev, { log = (m) => console.error(m) } = {}) {
  const asPath = resolve(rev);
  if (existsSync(join(asPath, "wrangler.toml"))) return fromCheckout(asPath, rev);
  let sha;
  try {
    sha = git(["rev-parse", "--verify", "--quiet", `${rev}^{commit}`]);
  } catch {
    throw new Error(`--baseline ${rev}: neither a checkout directory (with wrangler.toml) nor a git revision of ${ROOT}`);
  }
  const short = sha.slice(0, 12);
  const dir = join(ROOT, "target", "baselines", short);
  if (!existsSync(join(dir, "wrangler.toml"))) {
    mkdirSync(join(ROOT, "target", "baselines"), { recursive: true });
    log(`baseline ${rev}: checking out ${short} into ${dir}`);
    git(["worktree", "add", "--force", "--detach", dir, sha]);
  }
  if (!existsSync(join(dir, "node_modules"))) symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  if (!existsSync(join(dir, "build", "index.js"))) {
    log(`baseline ${rev}: building ${short} (a first build compiles every crate: minutes)`);
    const r = spawnSync(process.execPath, ["scripts/build.mjs"], {
      cwd: dir,
      stdio: ["ignore", "inherit", "inherit"],
    });
    if (r.status !== 0) throw new Error(`baseline ${rev}: the build of ${short} failed (exit ${r.status})`);
  }
  return { ...fromCheckout(dir, rev), commit: short };
}
