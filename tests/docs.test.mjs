// The docs stay readable and true to the tree: the README and docs/performance.md within
// their length budgets (issue #33), every relative link in README.md and docs/*.md pointing
// at a file or directory that exists (and, with an anchor, at a heading of that page), and
// no package registry named by its host name anywhere in the tracked files.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const pages = ["README.md", ...readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

const lines = (file) => readFileSync(join(ROOT, file), "utf8").split("\n").length - 1;

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
export function slug(heading) {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

function anchors(file) {
  const text = readFileSync(file, "utf8").replace(/```[\s\S]*?```/g, "");
  return new Set([...text.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1])));
}

test("README.md and docs/performance.md stay within 250 lines", () => {
  assert.ok(lines("README.md") <= 250, `README.md has ${lines("README.md")} lines`);
  assert.ok(lines("docs/performance.md") <= 250, `docs/performance.md has ${lines("docs/performance.md")} lines`);
});

test("every relative link in the docs resolves", () => {
  const broken = [];
  for (const page of pages) {
    const text = readFileSync(join(ROOT, page), "utf8").replace(/```[\s\S]*?```/g, "");
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const href = m[1];
      if (/^[a-z]+:/i.test(href)) continue;
      const [path, anchor] = href.split("#");
      const target = path ? resolve(ROOT, dirname(page), path) : join(ROOT, page);
      if (!existsSync(target)) {
        broken.push(`${page}: ${href} (no such file)`);
        continue;
      }
      if (anchor && target.endsWith(".md") && !anchors(target).has(anchor)) broken.push(`${page}: ${href} (no such heading)`);
    }
  }
  assert.deepEqual(broken, []);
});

test("the slug of a heading is GitHub's", () => {
  assert.equal(slug("Upgrading in place"), "upgrading-in-place");
  assert.equal(slug("The floor: the least a call can cost (2026-12-02)"), "the-floor-the-least-a-call-can-cost-2026-12-02");
});

test("no package registry is named by its host name in the tracked files", () => {
  const hosts = ["npmjs", "crates.io", "pypi.org", "registry.yarnpkg"];
  const files = execFileSync("git", ["ls-files"], { cwd: ROOT, encoding: "utf8" })
    .split("\n")
    .filter((f) => f && !f.endsWith("package-lock.json") && !f.endsWith("Cargo.lock") && !f.startsWith("fuzz/corpus/"));
  const found = [];
  for (const f of files) {
    let text;
    try {
      text = readFileSync(join(ROOT, f), "utf8");
    } catch {
      continue;
    }
    for (const h of hosts) if (text.toLowerCase().includes(h) && !f.endsWith("docs.test.mjs")) found.push(`${f}: ${h}`);
  }
  assert.deepEqual(found, []);
});
