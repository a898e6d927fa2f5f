#!/usr/bin/env node
// Differential check of the codec against Node's JSON.parse (README "Fuzzing").
//
// For every input of the corpus (fuzz/corpus/codec/*: the golden seeds plus what fuzzing
// found, and generated number and string cases), our codec decodes the bytes and encodes
// the value again (examples/codec_roundtrip.rs); Node decodes both our encoding and the
// input with JSON.parse plus the codec's reviver (tests/lib/codec.mjs) and compares the
// two values (Dates by time, byte arrays by bytes, strings with lone surrogates as U+FFFD,
// -0 as 0). A Date that V8 reads with its legacy parser (`Jan 2 2020`, `20000`, or an
// ISO-shaped string with a field out of the ISO parser's range, `0001-23`) is an invalid
// Date for us (a documented difference): counted apart, not a divergence. A number beyond a
// double is ±Infinity for both, written as null. An input that only one side accepts is a
// divergence, except nesting deeper than 128 levels (README "Limits").
//
// Usage: node scripts/codec-diff.mjs [--generated N] [dir-or-file ...]
// Exit code 1 when a divergence is found.

import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./lib/tools.mjs";
import { DATE_KEYS, base64ToBytes, decode } from "../tests/lib/codec.mjs";

/**
 * The ISO-8601 forms of the JavaScript Date parser (README: the codec revives only these):
 * a year of four digits, or of six with a sign, then optional month, day, time and offset.
 */
const ISO_FORM = /^(\d{4}|[+-]\d{6})(?:-(\d\d)(?:-(\d\d))?)?(?:T(\d\d):(\d\d)(?::(\d\d)(\.\d+)?)?(Z|[+-](\d\d):(\d\d))?)?$/;

/**
 * Whether V8 reads `text` with its ISO parser. A string of the ISO form with a field out
 * of that parser's range (month 23, minute 60, `-000000`, hour 24 past 24:00) is handed to
 * its legacy parser, which may still make a Date of it (`0001-23` is 2001-01-23): a legacy
 * form, not a divergence. Other strings (`20000`, `+2020`, `Jan 2 2020`) are legacy too.
 */
function readByIsoParser(text) {
  const m = ISO_FORM.exec(text);
  if (!m) return false;
  const [, year, month = "01", day = "01", hour = "00", minute = "00", second = "00", fraction = "", , offsetHour = "00", offsetMinute = "00"] = m;
  const n = Number;
  if (year === "-000000") return false;
  if (n(month) < 1 || n(month) > 12 || n(day) < 1 || n(day) > 31) return false;
  if (n(hour) > 24 || n(minute) > 59 || n(second) > 59) return false;
  if (n(hour) === 24 && (n(minute) !== 0 || n(second) !== 0 || /[1-9]/.test(fraction))) return false;
  return n(offsetHour) <= 23 && n(offsetMinute) <= 59;
}

/** A JS Date that V8 made from a legacy (non-ISO) form such as `Jan 2 2020`. */
class LegacyDate {
  constructor(text) {
    this.text = text;
    this.time = new Date(text).getTime();
  }
}

/** tests/lib/codec.mjs's decode, marking Dates parsed from legacy forms. */
function decodeMarked(text) {
  const toDate = (iso) => {
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) || readByIsoParser(iso) ? d : new LegacyDate(iso);
  };
  const tagged = (v, type, member) => v !== null && typeof v === "object" && !Array.isArray(v) && v.__type === type && typeof v[member] === "string";
  return JSON.parse(text, function reviver(key, value) {
    if (tagged(value, "Date", "iso")) return toDate(value.iso);
    if (tagged(value, "Uint8Array", "data")) return base64ToBytes(value.data);
    if (typeof value === "string" && DATE_KEYS.has(key)) {
      const d = toDate(value);
      if (d instanceof LegacyDate || !Number.isNaN(d.getTime())) return d;
    }
    return value;
  });
}

const args = process.argv.slice(2);
let generated = 2000;
const paths = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--generated") generated = Number(args[++i]);
  else paths.push(args[i]);
}
if (paths.length === 0) paths.push(join(ROOT, "fuzz", "corpus", "codec"));

function* files(p) {
  if (!existsSync(p)) return;
  if (statSync(p).isDirectory()) for (const f of readdirSync(p).sort()) yield* files(join(p, f));
  else yield p;
}

/** Deterministic PRNG (mulberry32). */
function rng(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function generatedInputs(n) {
  const r = rng(11);
  const out = [];
  const view = new DataView(new ArrayBuffer(8));
  for (let i = 0; i < n; i++) {
    // Random doubles of every magnitude, as Number#toString prints them.
    const nums = [];
    for (let k = 0; k < 8; k++) {
      view.setUint32(0, Math.floor(r() * 2 ** 32));
      view.setUint32(4, Math.floor(r() * 2 ** 32));
      const d = view.getFloat64(0);
      if (Number.isFinite(d)) nums.push(String(d));
      nums.push(String(r() * 10 ** Math.floor(r() * 40 - 20)));
    }
    out.push(Buffer.from(`[${nums.join(",")}]`));
  }
  for (const s of ["\\ud800", "\\udc00x", "\\ud83d\\ude00", "\\u0000", "\\u2028", "é", "\\\\ud800"]) out.push(Buffer.from(`["${s}"]`));
  // Dates of the ISO form with fields at and past the ends of their ranges, most of them
  // out of the ISO parser's (so legacy, or invalid for both); about one in fifteen in range,
  // where ours must equal V8's reading.
  const pick = (a) => a[Math.floor(r() * a.length)];
  const years = ["0000", "0001", "1969", "1970", "2020", "9999", "+000000", "-000000", "+275760", "-271821", "+275761", "-271822", "+010000", "-000001", "+002020"];
  const two = ["00", "01", "09", "10", "12", "13", "23", "24", "25", "28", "29", "30", "31", "32", "59", "60", "99"];
  const fractions = ["", ".0", ".5", ".05", ".999", ".9999", ".0000000001", ".123456789", ".1234567891"];
  const offsets = ["", "Z", "+00:00", "-00:00", "+23:59", "+24:00", "-12:30", "+01:60"];
  for (let i = 0; i < 60; i++) {
    const dates = [];
    for (let k = 0; k < 40; k++) {
      let d = pick(years);
      const shape = Math.floor(r() * 5);
      if (shape >= 1) d += `-${pick(two)}`;
      if (shape >= 2) d += `-${pick(two)}`;
      if (shape >= 3) d += `T${pick(two)}:${pick(two)}${r() < 0.7 ? `:${pick(two)}${pick(fractions)}` : ""}${pick(offsets)}`;
      dates.push(`{"__type":"Date","iso":"${d}"}`);
    }
    out.push(Buffer.from(`[${dates.join(",")}]`));
  }
  // Legacy forms among them: a year of five digits, or of four with a sign, and ISO forms
  // with a field out of the ISO parser's range (`0001-23` is 2001-01-23 for V8).
  for (const d of ["2026-01-02T03:04:05.678Z", "2026-01-02", "+275760-09-13T00:00:00.000Z", "garbage", "2026-01-02T03:04:05Z", "20000", "+2020", "020000-01-01", "+020000-01-01", "0001-23", "-000000-01", "2020-02-31", "2020-01-01T24:00Z", "+000000"]) {
    out.push(Buffer.from(`[{"createdAt":"${d}","x":{"__type":"Date","iso":"${d}"}}]`));
  }
  out.push(Buffer.from(`[${"[".repeat(127)}${"]".repeat(127)}]`));
  out.push(Buffer.from(`[1e400,-1e400,1e-400]`));
  return out;
}

const inputs = [];
for (const p of paths) for (const f of files(p)) inputs.push({ name: f.slice(ROOT.length + 1), bytes: readFileSync(f) });
for (const [i, bytes] of generatedInputs(generated).entries()) inputs.push({ name: `generated #${i}`, bytes });

const build = spawnSync("cargo", ["build", "--quiet", "--example", "codec_roundtrip"], { cwd: ROOT, stdio: "inherit" });
if (build.status !== 0) {
  console.error("[codec-diff] ERROR: cargo build --example codec_roundtrip failed");
  process.exit(1);
}
const bin = join(ROOT, "target", "debug", "examples", "codec_roundtrip");
const run = spawnSync(bin, [], { input: inputs.map((x) => x.bytes.toString("base64")).join("\n") + "\n", maxBuffer: 1 << 30, encoding: "utf8" });
if (run.status !== 0) {
  console.error(`[codec-diff] ERROR: codec_roundtrip failed: ${run.stderr}`);
  process.exit(1);
}
const answers = run.stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
if (answers.length !== inputs.length) throw new Error(`expected ${inputs.length} answers, got ${answers.length}`);

/** Whether a legacy-form Date was met while comparing (a documented difference). */
let legacySeen = false;

function same(a, b) {
  if (b instanceof LegacyDate) {
    legacySeen = true;
    // Ours: an invalid Date (tag), the string itself (date key), or the same time.
    return (a instanceof Date && (Number.isNaN(a.getTime()) || a.getTime() === b.time)) || a === b.text;
  }
  if (typeof a === "string" && typeof b === "string") return a.toWellFormed() === b.toWellFormed();
  if (typeof a === "number" && typeof b === "number") return a === b || (Number.isNaN(a) && Number.isNaN(b));
  // A number beyond a double reads as ±Infinity, which JSON.stringify (and our encoder)
  // writes as null.
  if (a === null && typeof b === "number" && !Number.isFinite(b)) return true;
  if (a instanceof Date && b instanceof Date) return Object.is(a.getTime(), b.getTime()) || a.getTime() === b.getTime();
  if (a instanceof Uint8Array && b instanceof Uint8Array) return Buffer.compare(Buffer.from(a), Buffer.from(b)) === 0;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (a && b && typeof a === "object" && typeof b === "object" && !Array.isArray(a) && !Array.isArray(b) && !(a instanceof Date) && !(b instanceof Date) && !(a instanceof Uint8Array) && !(b instanceof Uint8Array)) {
    const ka = Object.keys(a).map((k) => k.toWellFormed()).sort();
    const kb = Object.keys(b).map((k) => k.toWellFormed()).sort();
    if (ka.length !== kb.length || ka.some((k, i) => k !== kb[i])) return false;
    const byKey = (o) => new Map(Object.keys(o).map((k) => [k.toWellFormed(), o[k]]));
    const ma = byKey(a);
    const mb = byKey(b);
    return ka.every((k) => same(ma.get(k), mb.get(k)));
  }
  return a === b;
}

function depth(text) {
  let d = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "[" || c === "{") max = Math.max(max, ++d);
    else if (c === "]" || c === "}") d--;
  }
  return max;
}

const counts = { equal: 0, legacyDates: 0, bothRefused: 0, deep: 0, divergent: 0 };
const divergences = [];
const decoder = new TextDecoder("utf-8");
for (const [i, input] of inputs.entries()) {
  const text = decoder.decode(input.bytes);
  let theirs;
  let theirsOk = true;
  try {
    theirs = decodeMarked(text);
  } catch {
    theirsOk = false;
  }
  const ours = answers[i];
  if (ours.ok && theirsOk) {
    let again;
    try {
      again = decode(ours.out);
    } catch (e) {
      divergences.push(`${input.name}: JSON.parse refuses our encoding ${ours.out.slice(0, 200)} (${e.message})`);
      continue;
    }
    legacySeen = false;
    if (same(again, theirs)) counts[legacySeen ? "legacyDates" : "equal"]++;
    else divergences.push(`${input.name}: ${text.slice(0, 200)} -> ours ${ours.out.slice(0, 200)}`);
  } else if (!ours.ok && !theirsOk) counts.bothRefused++;
  // 128 levels is the documented limit (README "Limits"): 129 and deeper are refused.
  else if (!ours.ok && depth(text) > 128) counts.deep++;
  else divergences.push(`${input.name}: ${ours.ok ? "only we accept" : `only JSON.parse accepts (${ours.error})`}: ${text.slice(0, 200)}`);
}
counts.divergent = divergences.length;
for (const d of divergences.slice(0, 30)) console.log(`[codec-diff] DIVERGENCE ${d}`);
if (divergences.length > 30) console.log(`[codec-diff] ... and ${divergences.length - 30} more`);
console.log(
  `[codec-diff] ${inputs.length} inputs: ${counts.equal} equal after our round trip, ` +
    `${counts.legacyDates} equal but for Dates JavaScript reads from legacy (non-ISO) forms, ${counts.bothRefused} refused by both, ` +
    `${counts.deep} refused by us for depth > 128, ` +
    `${counts.divergent} divergences`,
);
process.exit(divergences.length ? 1 : 0);
