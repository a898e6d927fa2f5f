// Starts a built app (lib/app-server.mjs on the profile's Node 22, with a real world-celld
// client as its World) against a server of lib/workers.mjs, and talks to it: start a
// workflow, read its run, its output and the request trace.
//
//   const app = await startApp({ profile: "beta42", dir, client: "0.3", server: w });
//   // or the same app on an in-process World (no server: deliveries come from world-local):
//   // startApp({ dir, server: { env: {} }, worldModule: "@workflow/world-local", env: { WORKFLOW_LOCAL_DATA_DIR } })
//   const { runId } = await app.start("workflows/bench.ts", "seq10", []);
//   const run = await app.waitRun(runId);     // completed, failed or cancelled
//   await app.stop();

import { spawn } from "node:child_process";
import { join } from "node:path";
import { node22 } from "./profile.mjs";

export async function startApp({ profile = "beta42", dir, client = "0.3", server, env = {}, quiet = true, worldModule = `world-celld-${client}` }) {
  const { node, path } = node22(profile);
  // BENCH_APP_NODE_ARGS: extra Node flags for the app (e.g. "--cpu-prof --cpu-prof-dir=/tmp/p",
  // which NODE_OPTIONS refuses), to profile what the app spends its CPU on.
  const extra = (process.env.BENCH_APP_NODE_ARGS || "").split(" ").filter(Boolean);
  const child = spawn(node, [...extra, join(dir, "app-server.mjs")], {
    cwd: dir,
    env: {
      ...process.env,
      ...server.env,
      ...env,
      PATH: path,
      WORLD_MODULE: worldModule,
      PORT: "",
      WORKFLOW_TARGET_WORLD: "",
      FORCE_COLOR: "0",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const port = await new Promise((resolve, reject) => {
    let buf = "";
    const onData = (d) => {
      buf += d;
      output += d;
      const m = buf.match(/\{"listening":(\d+)\}/);
      if (m) resolve(Number(m[1]));
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", (d) => {
      output += d;
      if (!quiet) process.stderr.write(d);
    });
    child.on("exit", (code) => reject(new Error(`app exited (${code}) before listening:\n${output.slice(-4000)}`)));
  });
  child.stdout.on("data", (d) => {
    output = (output + d).slice(-200_000);
    if (!quiet) process.stdout.write(d);
  });
  const base = `http://127.0.0.1:${port}`;
  const call = async (method, p, body) => {
    const res = await fetch(base + p, {
      method,
      headers: body ? { "content-type": "application/json" } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    let value;
    try {
      value = JSON.parse(text);
    } catch {
      value = text;
    }
    if (!res.ok) {
      const err = new Error(`${method} ${p}: ${res.status} ${text.slice(0, 500)}`);
      err.status = res.status;
      err.body = value;
      throw err;
    }
    return value;
  };
  const app = {
    port,
    url: base,
    child,
    log: () => output,
    start: (file, workflow, args = []) => call("POST", "/start", { file, workflow, args }),
    run: (runId) => call("GET", `/runs/${encodeURIComponent(runId)}`),
    output: (runId) => call("GET", `/runs/${encodeURIComponent(runId)}/output`).then((r) => r.output),
    events: (runId) => call("GET", `/runs/${encodeURIComponent(runId)}/events`),
    trace: () => call("GET", "/trace"),
    executions: () => call("GET", "/executions"),
    resetTrace: () => call("POST", "/trace/reset"),
    /** The deliveries as the app saw them (open, peak, accepted, refused, failed, statuses, deliveries[]). */
    deliveries: () => call("GET", "/deliveries"),
    resetDeliveries: () => call("POST", "/deliveries/reset"),
    /** Resolves once the run's terminal event is answered and the app is quiet (no server requests; see app-server.mjs). */
    settled: (runId, { quietMs = 15, timeoutMs = 60_000 } = {}) =>
      call("GET", `/runs/${encodeURIComponent(runId)}/settled?quietMs=${quietMs}&timeoutMs=${timeoutMs}`),
    /** Polls the run until it is no longer pending or running; throws after timeoutMs. */
    async waitRun(runId, { timeoutMs = 60_000, intervalMs = 20 } = {}) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        let run;
        try {
          run = await app.run(runId);
        } catch (err) {
          if (Date.now() > deadline) throw err;
        }
        if (run && run.status !== "pending" && run.status !== "running") return run;
        if (Date.now() > deadline) throw new Error(`run ${runId} still ${run?.status} after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, intervalMs));
      }
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
      await exited;
      clearTimeout(timer);
    },
  };
  return app;
}
