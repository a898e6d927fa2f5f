// The RPC value codec ("tagged JSON"), spec wire.md §6.
//
//   Date        <-> {"__type":"Date","iso":"<toISOString()>"}
//   Uint8Array  <-> {"__type":"Uint8Array","data":"<padded base64>"}
//
// Encoding tags every Date and byte array at any depth, omits undefined object members,
// turns undefined array elements into null and a top-level undefined into null.
// Decoding is bottom-up; it also revives plain date strings under the five date keys.

export const DATE_KEYS = new Set(["createdAt", "updatedAt", "startedAt", "completedAt", "retryAfter"]);

const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;

/** Standard padded base64 of bytes. */
export function bytesToBase64(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** atob-like decoding: ASCII whitespace ignored, padding optional; anything else throws. */
export function base64ToBytes(data) {
  const s = data.replace(/[\t\n\f\r ]/g, "");
  if (!BASE64_RE.test(s)) throw new SyntaxError("invalid base64");
  const core = s.replace(/=+$/, "");
  if (core.length % 4 === 1) throw new SyntaxError("invalid base64 length");
  if (s.length !== core.length && s.length % 4 !== 0) throw new SyntaxError("invalid base64 padding");
  return new Uint8Array(Buffer.from(core, "base64"));
}

/** Converts a JS value to its plain-JSON wire form (not yet stringified). */
export function toWire(value) {
  if (value === undefined) return null;
  if (value === null || typeof value !== "object") {
    if (typeof value === "number" && !Number.isFinite(value)) return null;
    if (typeof value === "bigint") throw new TypeError("BigInt is not encodable");
    return value;
  }
  if (value instanceof Date) return { __type: "Date", iso: value.toISOString() };
  if (value instanceof Uint8Array) return { __type: "Uint8Array", data: bytesToBase64(value) };
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : toWire(v)));
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined || typeof v === "function" || typeof v === "symbol") continue;
    out[k] = toWire(v);
  }
  return out;
}

/** Encodes a value as tagged-JSON text. */
export function encode(value) {
  return JSON.stringify(toWire(value));
}

function isPlainTagged(v, type, member) {
  return (
    v !== null &&
    typeof v === "object" &&
    !Array.isArray(v) &&
    v.__type === type &&
    typeof v[member] === "string"
  );
}

/** Decodes tagged-JSON text into JS values (Dates, Uint8Arrays). Throws on bad JSON/base64. */
export function decode(text) {
  return JSON.parse(text, function reviver(key, value) {
    if (isPlainTagged(value, "Date", "iso")) return new Date(value.iso);
    if (isPlainTagged(value, "Uint8Array", "data")) return base64ToBytes(value.data);
    if (typeof value === "string" && DATE_KEYS.has(key)) {
      const d = new Date(value);
      if (!Number.isNaN(d.getTime())) return d;
    }
    return value;
  });
}
