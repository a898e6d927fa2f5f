// Our JS tagged-JSON codec (spec wire.md §6) and the golden normalization helpers.

import { test } from "node:test";
import assert from "node:assert/strict";
import { base64ToBytes, decode, encode } from "./lib/codec.mjs";
import { extractTokens, mediaType, normalizeBody, rewriteTokens } from "./lib/normalize.mjs";

test("codec: Dates at any depth round-trip with milliseconds, including epoch 0", () => {
  const v = { a: new Date(0), nested: { any: new Date("2026-01-02T03:04:05.678Z") }, list: [new Date(1)] };
  const text = encode(v);
  assert.match(text, /\{"__type":"Date","iso":"1970-01-01T00:00:00\.000Z"\}/);
  assert.deepEqual(decode(text), v);
});

test("codec: byte arrays round-trip, padded base64, empty bytes", () => {
  const bytes = new Uint8Array([0x00, 0x01, 0xfd, 0xfe, 0xff]);
  const text = encode([bytes, new Uint8Array(0), Buffer.from("hi")]);
  assert.equal(text, '[{"__type":"Uint8Array","data":"AAH9/v8="},{"__type":"Uint8Array","data":""},{"__type":"Uint8Array","data":"aGk="}]');
  const back = decode(text);
  assert.deepEqual([...back[0]], [...bytes]);
  assert.equal(back[1].length, 0);
  const big = new Uint8Array(200000).map((_, i) => i & 0xff);
  assert.deepEqual([...decode(encode(big))], [...big]);
});

test("codec: undefined members are omitted, undefined elements become null, top-level undefined is null", () => {
  assert.equal(encode({ a: undefined, b: 1 }), '{"b":1}');
  assert.equal(encode([undefined, 1]), "[null,1]");
  assert.equal(encode(undefined), "null");
  assert.equal(encode(NaN), "null");
});

test("codec: fallback date revival only under the five date keys", () => {
  const v = decode('{"createdAt":"2026-01-01T00:00:00.000Z","other":"2026-01-01T00:00:00.000Z","retryAfter":"nope"}');
  assert.ok(v.createdAt instanceof Date);
  assert.equal(v.other, "2026-01-01T00:00:00.000Z");
  assert.equal(v.retryAfter, "nope");
});

test("codec: atob-like base64 (whitespace and missing padding ok, garbage rejected)", () => {
  assert.deepEqual([...base64ToBytes("aG k")], [0x68, 0x69]);
  assert.deepEqual([...base64ToBytes("aGk")], [0x68, 0x69]);
  assert.throws(() => decode('{"__type":"Uint8Array","data":"!!!"}'));
  assert.throws(() => base64ToBytes("a"));
});

test("normalize: keys sorted, server-clock values masked, client-chosen ones kept", () => {
  const a = normalizeBody(
    '{"b":1795968878250,"a":"run:wf:1795968878250:x","c":{"__type":"Date","iso":"2026-11-29T16:14:29.147Z"},"d":"2099-01-01T00:00:00.000Z","e":"2000-01-01T00:00:00.000Z","f":946684800000}',
  );
  assert.equal(
    a,
    '{"a":"run:wf:«MS»:x","b":«MS»,"c":{"__type":"Date","iso":"«TS»"},"d":"2099-01-01T00:00:00.000Z","e":"2000-01-01T00:00:00.000Z","f":946684800000}',
  );
  assert.equal(normalizeBody('{"x":1.0}'), normalizeBody('{"x":1}'));
  assert.equal(normalizeBody('{"retryAfterSeconds":123}'), '{"retryAfterSeconds":«N»}');
  assert.equal(normalizeBody('{"retryAfterSeconds":0}'), '{"retryAfterSeconds":0}');
  assert.equal(normalizeBody('{"lastError":"transport error: x"}'), normalizeBody('{"lastError":"transport error: y"}'));
  assert.notEqual(normalizeBody('{"lastError":"HTTP 500"}'), normalizeBody('{"lastError":"HTTP 501"}'));
  // 26-digit event ids and 14-digit runs are not 13-digit runs.
  assert.equal(normalizeBody('"evnt_00000000000000000000000001 17959688782501"'), '"evnt_00000000000000000000000001 17959688782501"');
  assert.equal(normalizeBody("TypeError: x\n    at y", { firstLine: true }), "raw:TypeError: x");
  assert.equal(normalizeBody(""), "raw:");
});

test("normalize: tokens in canonical order and rewriting with S", () => {
  const text = '{"z":1795968878251,"a":"x 2026-11-29T16:14:29.147Z y 1795968878250"}';
  assert.deepEqual(extractTokens(text), [Date.parse("2026-11-29T16:14:29.147Z"), 1795968878250, 1795968878251]);
  const S = new Map([
    [1795968878250, 1800000000000],
    [Date.parse("2026-11-29T16:14:29.147Z"), Date.parse("2027-01-01T00:00:00.001Z")],
  ]);
  assert.equal(
    rewriteTokens('["2026-11-29T16:14:29.147Z","dlq:1795968878250:m",1795968878250,1795968878251]', S),
    '["2027-01-01T00:00:00.001Z","dlq:1800000000000:m",1800000000000,1795968878251]',
  );
  assert.equal(mediaType("Application/JSON; charset=utf-8"), "application/json");
  assert.equal(mediaType(null), null);
});
