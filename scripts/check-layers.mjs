#!/usr/bin/env node
// The layering check (.ci/run, after the lint; tests/check-layers.test.mjs checks it on
// synthetic input): reads every `use` and inline path starting with `crate`, `super`,
// `self` or one of the file's own child modules in src/**/*.rs, maps each to the file of
// the module it names (through re-exports: `crate::wire::Value` is wire/value.rs, where
// `Value` is defined), and fails when
//   * files import each other in a circle (any strongly connected set of two or more), or
//   * a file imports a module of a higher layer, or a core imports another core
//     (cores know each other only through `protocol`).
// Test code (files named tests*.rs or under a tests/ directory, and inline
// `#[cfg(test)] mod … { … }` blocks) is left out: nothing imports it.
//
//   node scripts/check-layers.mjs           the verdict, and each violation
//   node scripts/check-layers.mjs --graph   also print the file graph (for docs)

import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { ROOT } from "./lib/tools.mjs";

/** Layer of each top-level module (src/<name>.rs or src/<name>/). Lower may not import higher. */
export const LAYERS = {
  wire: 0,
  store: 1,
  config: 1,
  testing: 1, // test support with no imports of ours (block_on)
  protocol: 2, // what one object asks another: hop, shard addressing, lifecycle, leases, calls
  admin: 4,
  facade: 4,
  partitions: 4,
  coordinator: 4,
  sweep: 4,
  shell: 5,
};
/**
 * The cores (layer 3), by family: each a state machine over `Store`; a core imports no
 * other family's modules (they know each other only through the protocol layer). The hook
 * shard family is one core served as three classes (by token, by id, and their shared code).
 */
export const CORE_FAMILIES = {
  run: ["run"],
  stream: ["stream"],
  queue: ["queue"],
  catalog: ["catalog"],
  hook_shard: ["hook_shard", "hook_token", "hook_id"],
  index: ["index"],
};
const FAMILY = {};
for (const [family, members] of Object.entries(CORE_FAMILIES)) {
  for (const m of members) {
    LAYERS[m] = 3;
    FAMILY[m] = family;
  }
}

const SRC = join(ROOT, "src");

function walk(dir, out = []) {
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (f.endsWith(".rs")) out.push(p);
  }
  return out;
}

/** src/a/b.rs → ["a","b"]; src/a/mod.rs → ["a"]; src/lib.rs → []. */
export function modulePath(file) {
  const parts = relative(SRC, file).split(sep);
  const last = parts.pop().replace(/\.rs$/, "");
  if (last !== "mod" && last !== "lib") parts.push(last);
  return parts;
}

function isTestFile(file) {
  const rel = relative(SRC, file).split(sep);
  return rel.some((p) => p === "tests") || /^tests\w*\.rs$/.test(rel[rel.length - 1]);
}

/**
 * Removes comments (line, doc and nested block comments), string literals (plain, byte,
 * C and raw `r#"…"#`, each left as `""`), char literals (`'x'`, `b'\n'`; lifetimes stay)
 * and `#[cfg(test)] mod x { … }` blocks: what is left is code, whose braces balance.
 */
export function stripNonCode(text) {
  const isIdent = (ch) => ch !== undefined && /\w/.test(ch);
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const atToken = !isIdent(text[i - 1]);
    const raw = atToken ? /^[bc]?r(#*)"/.exec(text.slice(i, i + 260)) : null;
    const quoted = c === '"' || (atToken && /^[bc]"/.test(text.slice(i, i + 2)));
    const char = c === "'" || (atToken && c === "b" && text[i + 1] === "'");
    if (c === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === "/" && text[i + 1] === "*") {
      let depth = 0;
      do {
        if (text.startsWith("/*", i)) (depth++, (i += 2));
        else if (text.startsWith("*/", i)) (depth--, (i += 2));
        else i++;
      } while (depth > 0 && i < text.length);
      out += " ";
    } else if (raw) {
      const end = text.indexOf(`"${raw[1]}`, i + raw[0].length);
      i = end < 0 ? text.length : end + 1 + raw[1].length;
      out += '""';
    } else if (quoted) {
      i = text.indexOf('"', i) + 1;
      while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
      i++;
      out += '""';
    } else if (char) {
      const start = text.indexOf("'", i);
      const literal = /^'(?:\\(?:u\{[0-9A-Fa-f_]*\}|x[0-9A-Fa-f]{2}|.)|[^\\'\n])'/su.exec(text.slice(start, start + 16));
      if (literal) {
        i = start + literal[0].length;
        out += "' '";
      } else {
        out += c; // a lifetime or a label: `'a`
        i++;
      }
    } else {
      out += c;
      i++;
    }
  }
  for (;;) {
    const m = /#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{/.exec(out);
    if (!m) break;
    let depth = 0;
    let j = m.index + m[0].length - 1;
    for (; j < out.length; j++) {
      if (out[j] === "{") depth++;
      else if (out[j] === "}" && --depth === 0) break;
    }
    out = out.slice(0, m.index) + out.slice(j + 1);
  }
  return out;
}

/** Expands a use tree `a::{b, c::{d, e}}` into paths [["a","b"], ["a","c","d"], …]. */
export function expandUseTree(tree, { aliases = false } = {}) {
  // `a as b` → `a` (or, with `aliases`, `a@b`: the caller splits the last segment)
  tree = tree.replace(/\s+as\s+(\w+)/g, aliases ? "@$1" : "").replace(/\s+/g, "");
  const out = [];
  const rec = (prefix, t) => {
    const brace = t.indexOf("{");
    if (brace < 0) {
      const path = t.split("::").filter(Boolean);
      out.push([...prefix, ...path]);
      return;
    }
    const head = t.slice(0, brace).split("::").filter(Boolean);
    const inner = t.slice(brace + 1, t.lastIndexOf("}"));
    let depth = 0;
    let start = 0;
    for (let i = 0; i <= inner.length; i++) {
      const ch = inner[i];
      if (ch === "{") depth++;
      else if (ch === "}") depth--;
      else if ((ch === "," && depth === 0) || i === inner.length) {
        const part = inner.slice(start, i);
        if (part) rec([...prefix, ...head], part);
        start = i + 1;
      }
    }
  };
  rec([], tree);
  return out;
}

/** The child modules a file declares (`mod x;`, `pub mod x;`), from its code. */
function children(code) {
  return new Set([...code.matchAll(/\bmod\s+(\w+)\s*;/g)].map((m) => m[1]));
}

/** Resolves a path as written in `file` (module path `self`) to an absolute module path. */
function resolver(self, kids) {
  return (path) => {
    if (path[0] === "crate") return path.slice(1);
    if (path[0] === "super") {
      let base = self.slice(0, -1);
      path = path.slice(1);
      while (path[0] === "super") {
        base = base.slice(0, -1);
        path = path.slice(1);
      }
      return [...base, ...path];
    }
    if (path[0] === "self") return [...self, ...path.slice(1)];
    if (kids.has(path[0])) return [...self, ...path]; // a path into one of its own child modules
    return null; // std, another crate
  };
}

const PUB_USE = /\bpub(?:\([^)]*\))?\s+use\s+([^;]*);/g;

/**
 * The names a file re-exports (`pub use a::b::Name;`, `pub use child::Name;`): Name → the
 * absolute path it stands for. A path through the file to such a name is a path to where
 * the name is defined (so `use crate::wire::Value` depends on wire/value.rs, not on the
 * facade wire/mod.rs, and a circle through a re-export is still a circle).
 */
export function reexports(file, text) {
  const code = stripNonCode(text);
  const resolve = resolver(modulePath(file), children(code));
  const out = new Map();
  for (const m of code.matchAll(PUB_USE)) {
    for (const p of expandUseTree(m[1], { aliases: true })) {
      const [name, alias] = p[p.length - 1].split("@");
      const r = resolve([...p.slice(0, -1), name]);
      if (r && name !== "*") out.set(alias ?? name, r);
    }
  }
  return out;
}

/**
 * The module paths a file refers to (absolute, without the `crate` root): its `use` trees
 * and inline paths starting with `crate`, `super`, `self` or one of its own child modules
 * (a `mod.rs` that dispatches to `chunks::…` depends on chunks.rs). A module re-exporting
 * its own child (`pub use child::Name;`) is a facade, not a reference: a path through it
 * is followed to the child (see [`reexports`], [`targetOf`]).
 */
export function references(file, text) {
  const code = stripNonCode(text);
  const kids = children(code);
  const resolve = resolver(modulePath(file), kids);
  const refs = [];
  for (const m of code.matchAll(/\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]*);/g)) {
    for (const p of expandUseTree(m[2])) {
      if (m[1] && (kids.has(p[0]) || (p[0] === "self" && kids.has(p[1])))) continue;
      const r = resolve(p.filter((x) => x !== "*"));
      if (r) refs.push(r);
    }
  }
  const noUse = code.replace(/\buse\s+[^;]*;/g, "").replace(/\bmod\s+\w+\s*;/g, "");
  for (const m of noUse.matchAll(/(?<![\w:])(\w+)((?:::\w+)+)/g)) {
    if (m[1] !== "crate" && m[1] !== "super" && !kids.has(m[1])) continue;
    const r = resolve([m[1], ...m[2].split("::").filter(Boolean)]);
    if (r) refs.push(r);
  }
  return refs;
}

/**
 * The file that defines what the absolute path `ref` names: the file of its longest module
 * prefix, or, when that module re-exports the next name (`aliases`: file → [`reexports`]),
 * the file of what the re-export stands for (followed a few levels).
 */
export function targetOf(ref, byModule, aliases) {
  for (let hops = 0; hops < 8; hops++) {
    let n = ref.length;
    while (n > 0 && !byModule.has(ref.slice(0, n).join("::"))) n--;
    if (n === 0) return null;
    const file = byModule.get(ref.slice(0, n).join("::"));
    const via = n < ref.length ? aliases.get(file)?.get(ref[n]) : undefined;
    if (!via) return file;
    ref = [...via, ...ref.slice(n + 1)];
  }
  return null;
}

export function buildGraph() {
  const files = walk(SRC).sort();
  const byModule = new Map(files.map((f) => [modulePath(f).join("::"), f]));
  const texts = new Map(files.map((f) => [f, readFileSync(f, "utf8")]));
  const aliases = new Map(files.map((f) => [f, reexports(f, texts.get(f))]));
  const edges = new Map();
  for (const file of files) {
    if (isTestFile(file)) continue;
    const targets = new Set();
    for (const ref of references(file, texts.get(file))) {
      const target = targetOf(ref, byModule, aliases);
      if (target && target !== file && !isTestFile(target)) targets.add(target);
    }
    edges.set(file, targets);
  }
  return { files: files.filter((f) => !isTestFile(f)), edges };
}

/** Tarjan's strongly connected components of two or more files. */
export function cycles(files, edges) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  const strong = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v) || []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const comp = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1) out.push(comp.sort());
    }
  };
  for (const f of files) if (!idx.has(f)) strong(f);
  return out;
}

const top = (file) => modulePath(file)[0] ?? "lib";

export function layerViolations(files, edges) {
  const out = [];
  for (const from of files) {
    const a = top(from);
    if (!(a in LAYERS)) {
      if (a !== "lib") out.push({ from, to: null, why: `module \`${a}\` has no layer in scripts/check-layers.mjs` });
      continue;
    }
    for (const to of edges.get(from)) {
      const b = top(to);
      if (b === a || !(b in LAYERS)) continue;
      if (LAYERS[b] > LAYERS[a]) out.push({ from, to, why: `${a} (layer ${LAYERS[a]}) imports ${b} (layer ${LAYERS[b]})` });
      else if (LAYERS[a] === 3 && LAYERS[b] === 3 && FAMILY[a] !== FAMILY[b]) out.push({ from, to, why: `core ${a} imports core ${b}` });
    }
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { files, edges } = buildGraph();
  const rel = (f) => relative(ROOT, f);
  if (process.argv.includes("--graph")) {
    for (const f of files) console.log(`${rel(f)} -> ${[...edges.get(f)].map(rel).join(", ")}`);
  }
  const circles = cycles(files, edges);
  const upward = layerViolations(files, edges);
  for (const c of circles) console.log(`circle of ${c.length} files: ${c.map(rel).join(", ")}`);
  for (const v of upward) console.log(`layer: ${rel(v.from)} -> ${v.to ? rel(v.to) : "?"}: ${v.why}`);
  console.log(`check-layers: ${files.length} files, ${circles.length} circles, ${upward.length} layer violations`);
  process.exit(circles.length || upward.length ? 1 : 0);
}
