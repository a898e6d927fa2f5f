// Golden normalization (shared/golden/README.md §4) and server-clock token handling (§5).
//
// normalizeBody(text, {firstLine}) -> a canonical string: JSON bodies with sorted keys and
// masked server-clock values, other bodies as (masked) raw text.
// extractTokens(text) -> server-clock instants (epoch ms) in canonical traversal order.
// rewriteTokens(text, S) -> the text with every server-clock token that is a key of S replaced.

export const WINDOW_START = 1577836800000; // 2020-01-01T00:00:00.000Z
export const WINDOW_END = 4070908800000; // 2099-01-01T00:00:00.000Z

const ISO_SRC = String.raw`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z`;
const D13_SRC = String.raw`(?<!\d)\d{13}(?!\d)`;
const TOKEN_RE = () => new RegExp(`(${ISO_SRC})|(${D13_SRC})`, "g");

export const inWindow = (ms) => Number.isFinite(ms) && ms >= WINDOW_START && ms < WINDOW_END;

function isoMs(iso) {
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? null : ms;
}

/** Server-clock tokens of one string, left to right: [{index, length, ms, kind}]. */
export function stringTokens(s) {
  const out = [];
  for (const m of s.matchAll(TOKEN_RE())) {
    if (m[1] !== undefined) {
      const ms = isoMs(m[1]);
      if (ms !== null && inWindow(ms)) out.push({ index: m.index, length: m[0].length, ms, kind: "iso" });
    } else {
      const ms = Number(m[2]);
      if (inWindow(ms)) out.push({ index: m.index, length: m[0].length, ms, kind: "ms" });
    }
  }
  return out;
}

export function maskString(s) {
  const toks = stringTokens(s);
  if (toks.length === 0) return s;
  let out = "";
  let pos = 0;
  for (const t of toks) {
    out += s.slice(pos, t.index) + (t.kind === "iso" ? "«TS»" : "«MS»");
    pos = t.index + t.length;
  }
  return out + s.slice(pos);
}

const isMsNumber = (v) => typeof v === "number" && Number.isInteger(v) && inWindow(v);

function parseJson(text) {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** Canonical text of a parsed JSON value with the §4 masks applied (`mask`: strings). */
export function canonical(value, key = null, mask = maskString) {
  if (value === null) return "null";
  if (typeof value === "number") {
    if (key === "retryAfterSeconds" && Number.isInteger(value) && value > 0) return "«N»";
    if (isMsNumber(value)) return "«MS»";
    return JSON.stringify(value);
  }
  if (typeof value === "boolean") return String(value);
  if (typeof value === "string") {
    if (key === "lastError" && value.startsWith("transport error: ")) {
      return JSON.stringify("transport error: «…»");
    }
    return JSON.stringify(mask(value));
  }
  if (Array.isArray(value)) return `[${value.map((v) => canonical(v, null, mask)).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k], k, mask)}`).join(",")}}`;
}

/** §4: the normalized form of a response (or callback) body. */
export function normalizeBody(text, { firstLine = false, mask = maskString } = {}) {
  let t = text;
  if (firstLine) t = t.split("\n")[0];
  const p = parseJson(t);
  if (p.ok) return canonical(p.value, null, mask);
  return `raw:${mask(t)}`;
}

/** §5 step 4.4: server-clock instants in canonical traversal order. */
export function extractTokens(text) {
  return extractTokens040(text)
    .filter((t) => t.kind === "ms")
    .map((t) => t.v);
}

/** §5 step 4.2: replace every server-clock token whose instant is in S by S's value. */
export function rewriteTokens(text, S) {
  if (S.size === 0) return text;
  return text.replace(TOKEN_RE(), (whole, iso, d13) => {
    if (iso !== undefined) {
      const ms = isoMs(iso);
      if (ms === null || !inWindow(ms) || !S.has(ms)) return whole;
      return new Date(S.get(ms)).toISOString();
    }
    const ms = Number(d13);
    if (!inWindow(ms) || !S.has(ms)) return whole;
    return String(S.get(ms)).padStart(13, "0");
  });
}

/** The media type of a content-type header: the part before `;`, trimmed, lower-cased. */
export function mediaType(ct) {
  if (ct == null) return null;
  return ct.split(";")[0].trim().toLowerCase();
}

// --- 0.4.0 additions (shared/golden-0.4/README.md §3) ----------------------------------
// UUIDs (server-minted claim ids) are masked like server-clock tokens, learned into a second
// map U (recorded -> actual) and substituted in request bodies. Only 0.4 replays use these.

const UUID_SRC = String.raw`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`;
const UUID_RE = () => new RegExp(UUID_SRC, "g");

/** maskString plus §3.1: every UUID substring becomes «UUID». */
export function maskString040(s) {
  return maskString(s).replace(UUID_RE(), "«UUID»");
}

/** normalizeBody with UUID masking. */
export function normalizeBody040(text, { firstLine = false } = {}) {
  return normalizeBody(text, { firstLine, mask: maskString040 });
}

/** The tokens of one string, left to right: instants ({kind:"ms"}) and UUIDs ({kind:"uuid"}). */
function stringTokens040(s) {
  const found = stringTokens(s).map((t) => ({ index: t.index, kind: "ms", v: t.ms }));
  for (const m of s.matchAll(UUID_RE())) found.push({ index: m.index, kind: "uuid", v: m[0] });
  return found.sort((a, b) => a.index - b.index);
}

/** §3.2: server-clock instants and UUIDs in canonical traversal order: [{kind, v}]. */
export function extractTokens040(text) {
  const p = parseJson(text);
  const out = [];
  if (!p.ok) {
    for (const t of stringTokens040(text)) out.push({ kind: t.kind, v: t.v });
    return out;
  }
  const walk = (v, key) => {
    if (typeof v === "number") {
      if (isMsNumber(v) && key !== "retryAfterSeconds") out.push({ kind: "ms", v });
    } else if (typeof v === "string") {
      if (key === "lastError" && v.startsWith("transport error: ")) return;
      for (const t of stringTokens040(v)) out.push({ kind: t.kind, v: t.v });
    } else if (Array.isArray(v)) {
      for (const x of v) walk(x);
    } else if (v && typeof v === "object") {
      for (const k of Object.keys(v).sort()) walk(v[k], k);
    }
  };
  walk(p.value, null);
  return out;
}

/** §3.2: replace every UUID that is a key of U by its value. */
export function rewriteUuids(text, U) {
  if (U.size === 0) return text;
  return text.replace(UUID_RE(), (u) => (U.has(u) ? U.get(u) : u));
}
