// Where the native build tools live and how to find them.
//
// The cargo-installed tool (wasm-bindgen-cli) goes to a per-machine cache,
// one directory per tool and version, so every clone on the machine shares them:
//   ${XDG_CACHE_HOME:-$HOME/.cache}/world-celld-rs/<tool>-<version>/bin/<binary>
// wasm-opt comes from the npm package `binaryen`, esbuild from the one wrangler brings.
// Each path can be overridden by an environment variable (WASM_BINDGEN_BIN, WASM_OPT_BIN, ESBUILD_BIN).

import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

export function cacheRoot() {
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "world-celld-rs");
}

/** The wasm-bindgen version the crate is locked to (the CLI must match it exactly). */
export function wasmBindgenVersion() {
  const lock = join(ROOT, "Cargo.lock");
  if (existsSync(lock)) {
    const text = readFileSync(lock, "utf8");
    const m = text.match(/\[\[package\]\]\s*\nname = "wasm-bindgen"\s*\nversion = "([^"]+)"/);
    if (m) return m[1];
  }
  const toml = readFileSync(join(ROOT, "Cargo.toml"), "utf8");
  const m = toml.match(/^\s*wasm-bindgen\s*=\s*(?:\{[^}]*version\s*=\s*)?"=?([0-9][^"]*)"/m);
  if (m) return m[1];
  throw new Error("cannot find the wasm-bindgen version in Cargo.lock or Cargo.toml");
}

/** Cargo-installed tools: name, crate, version, binary, cache dir, extra install flags. */
export function cargoTools() {
  const root = cacheRoot();
  const wbg = wasmBindgenVersion();
  return [
    {
      name: "wasm-bindgen",
      crate: "wasm-bindgen-cli",
      version: wbg,
      dir: join(root, `wasm-bindgen-${wbg}`),
      bin: "wasm-bindgen",
      env: "WASM_BINDGEN_BIN",
      // Not --locked: its lockfile wants a webpki-roots version the index lacks.
      flags: [],
    },
  ];
}

export function toolBinary(tool) {
  if (process.env[tool.env]) return process.env[tool.env];
  return join(tool.dir, "bin", tool.bin);
}

/** True when the binary exists and reports the wanted version. */
export function toolReady(tool) {
  const bin = toolBinary(tool);
  if (!existsSync(bin)) return false;
  const r = spawnSync(bin, ["--version"], { encoding: "utf8" });
  if (r.status !== 0) return false;
  return (r.stdout || "").includes(tool.version);
}

function resolveFrom(spec, base) {
  try {
    return createRequire(base).resolve(spec);
  } catch {
    return null;
  }
}

/** wasm-opt from the npm package binaryen (Debian's is too old for this wasm). */
export function wasmOptBinary() {
  if (process.env.WASM_OPT_BIN) return process.env.WASM_OPT_BIN;
  const pkg = resolveFrom("binaryen/package.json", join(ROOT, "package.json"));
  if (!pkg) return null;
  const bin = join(dirname(pkg), "bin", "wasm-opt");
  return existsSync(bin) ? bin : null;
}

/** The native esbuild binary that wrangler uses. */
export function esbuildBinary() {
  if (process.env.ESBUILD_BIN) return process.env.ESBUILD_BIN;
  const wranglerPkg = resolveFrom("wrangler/package.json", join(ROOT, "package.json"));
  const bases = [wranglerPkg, join(ROOT, "package.json")].filter(Boolean);
  for (const base of bases) {
    const esbuildPkg = resolveFrom("esbuild/package.json", base);
    if (!esbuildPkg) continue;
    const platformPkg = resolveFrom(
      `@esbuild/${process.platform}-${process.arch}/package.json`,
      esbuildPkg,
    );
    if (platformPkg) {
      const bin = join(dirname(platformPkg), "bin", "esbuild");
      if (existsSync(bin)) return bin;
    }
    const bin = join(dirname(esbuildPkg), "bin", "esbuild");
    if (existsSync(bin)) return bin;
  }
  return null;
}
