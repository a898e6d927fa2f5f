// The layering check (scripts/check-layers.mjs) on synthetic input: the use-tree
// expansion, what counts as code, and the two verdicts (file circles, imports that run up
// the layers or across core families).
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { ROOT } from "../scripts/lib/tools.mjs";
import { cycles, expandUseTree, layerViolations, references, reexports, stripNonCode, targetOf } from "../scripts/check-layers.mjs";

const src = (...parts) => join(ROOT, "src", ...parts);

test("expandUseTree expands a nested use tree", () => {
  assert.deepEqual(expandUseTree("crate::a::{b, c::{d, e as f}, g::*}"), [
    ["crate", "a", "b"],
    ["crate", "a", "c", "d"],
    ["crate", "a", "c", "e"],
    ["crate", "a", "g", "*"],
  ]);
  assert.deepEqual(expandUseTree("super::x"), [["super", "x"]]);
});

test("stripNonCode drops test modules, comments and literals", () => {
  const text = [
    "//! see crate::doc::only",
    "use crate::kept::Item; // crate::line::comment",
    "/* crate::block /* nested */ comment */",
    'const S: &str = "crate::in_string"; const R: &str = r#"crate::"raw""#;',
    "const Q: char = '\"'; fn f<'a>(x: &'a str) -> &'a str { x }",
    "const K: [&str; 1] = [\"retryAfter\"]; fn g() { crate::after::raw_lookalike(); }",
    "#[cfg(test)]",
    "mod tests {",
    "    use crate::x;",
    "    fn t() { let _ = '{'; }",
    "}",
    "fn tail() { crate::tail::call(); }",
  ].join("\n");
  const code = stripNonCode(text);
  for (const gone of ["crate::doc", "crate::line", "crate::block", "crate::in_string", "crate::\"raw", "crate::x", "mod tests"]) {
    assert.ok(!code.includes(gone), `${gone} should be stripped:\n${code}`);
  }
  for (const kept of ["use crate::kept::Item;", "crate::after::raw_lookalike", "crate::tail::call", "&'a str"]) {
    assert.ok(code.includes(kept), `${kept} should be kept:\n${code}`);
  }
  // The paths a file refers to, from what is left.
  const refs = references(src("run", "lease.rs"), text).map((p) => p.join("::"));
  assert.deepEqual(refs.sort(), ["after::raw_lookalike", "kept::Item", "tail::call"]);
});

test("a module refers to the children it uses, not to those it only re-exports", () => {
  const text = [
    "mod chunks;",
    "pub mod keys;",
    "#[cfg(test)]",
    "mod tests;",
    "pub use keys::Key;",
    "use chunks::write;",
    "fn f() { chunks::read(); other::x(); keys::Y; let _ = Self::chunks; }",
  ].join("\n");
  const refs = references(src("stream", "mod.rs"), text).map((p) => p.join("::"));
  assert.deepEqual(refs.sort(), ["stream::chunks::read", "stream::chunks::write", "stream::keys::Y"]);
});

test("a path through a re-export leads to the file that defines the name", () => {
  const mod = src("wire", "mod.rs");
  const value = src("wire", "value.rs");
  const error = src("wire", "error.rs");
  const text = "pub mod error;\npub mod value;\npub use error::{RouterError, RpcError as Thrown};\npub use value::*;\npub(crate) use value::Value;\n";
  const aliases = new Map([[mod, reexports(mod, text)]]);
  assert.deepEqual(aliases.get(mod).get("Value"), ["wire", "value", "Value"]);
  assert.deepEqual(aliases.get(mod).get("Thrown"), ["wire", "error", "RpcError"]);
  const byModule = new Map([
    ["wire", mod],
    ["wire::value", value],
    ["wire::error", error],
  ]);
  assert.equal(targetOf(["wire", "Value"], byModule, aliases), value);
  assert.equal(targetOf(["wire", "Thrown"], byModule, aliases), error);
  assert.equal(targetOf(["wire", "value", "Map"], byModule, aliases), value);
  assert.equal(targetOf(["wire", "Other"], byModule, aliases), mod, "a name the facade does not re-export is its own");
  assert.equal(targetOf(["nowhere", "x"], byModule, aliases), null);
});

test("cycles finds a circle of files and nothing else", () => {
  const [a, b, c, d] = ["a.rs", "b.rs", "c.rs", "d.rs"].map((f) => src("wire", f));
  const edges = new Map([
    [a, new Set([b])],
    [b, new Set([c])],
    [c, new Set([a])],
    [d, new Set([a])],
  ]);
  assert.deepEqual(cycles([a, b, c, d], edges), [[a, b, c]]);
  edges.set(c, new Set());
  assert.deepEqual(cycles([a, b, c, d], edges), []);
});

test("layerViolations flags an upward import and a core importing another core", () => {
  const wire = src("wire", "router.rs");
  const protocol = src("protocol", "calls.rs");
  const run = src("run", "lease.rs");
  const catalog = src("catalog", "mod.rs");
  const facade = src("facade", "mod.rs");
  const hookToken = src("hook_token", "mod.rs");
  const hookShard = src("hook_shard", "records.rs");
  const edges = new Map([
    [wire, new Set([run])], // up: wire (0) → run (3)
    [protocol, new Set([wire])], // down: fine
    [run, new Set([catalog, protocol])], // across core families
    [catalog, new Set()],
    [facade, new Set([run, catalog, protocol])], // front door → cores: fine
    [hookToken, new Set([hookShard])], // within the hook shard family: fine
    [hookShard, new Set([protocol])],
  ]);
  const found = layerViolations([...edges.keys()], edges).map((v) => v.why);
  assert.deepEqual(found, ["wire (layer 0) imports run (layer 3)", "core run imports core catalog"]);
  const stray = src("nowhere", "mod.rs");
  const unknown = layerViolations([stray], new Map([[stray, new Set()]]));
  assert.equal(unknown.length, 1);
  assert.match(unknown[0].why, /module `nowhere` has no layer/);
});
