// Command-line options shared by the workflow, io and DevKit benches: one definition of a
// flag's value, a positive integer, `--client`, `--profile` and `--var NAME=VALUE`, each
// throwing a clear error for bad input.

import { CLIENTS, PROFILES } from "../../tests/conformance/lib/profile.mjs";

/** The value after flag `argv[i]`; throws when it is missing or is another flag. */
export function flagValue(argv, i, flag) {
  if (i + 1 >= argv.length || argv[i + 1].startsWith("--")) throw new Error(`${flag} needs a value`);
  return argv[i + 1];
}

export function positiveInt(s, flag) {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} needs a positive integer, got ${s}`);
  return n;
}

/** `--client 0.3|0.4|both` → the client keys. */
export function clientsArg(c) {
  if (c === "both") return Object.keys(CLIENTS);
  if (CLIENTS[c]) return [c];
  throw new Error(`--client: 0.3, 0.4 or both, got ${c}`);
}

export function profileArg(p) {
  if (!PROFILES[p]) throw new Error(`--profile: ${Object.keys(PROFILES).join(" or ")}, got ${p}`);
  return p;
}

/** `--var NAME=VALUE` into `vars` (the value may hold `=`). */
export function varArg(kv, vars) {
  const eq = kv.indexOf("=");
  if (eq < 1) throw new Error(`--var needs NAME=VALUE, got ${kv}`);
  vars[kv.slice(0, eq)] = kv.slice(eq + 1);
}
