// A minimal RPC client for the worker: POST /v1/rpc/{binding}/{name}/{method} with a
// tagged-JSON argument array and a bearer secret (spec wire.md §1–§7).

import http from "node:http";
import { decode, encode } from "./codec.mjs";

export class RpcError extends Error {
  constructor(status, body, text) {
    const err = body && typeof body === "object" && body.error ? body.error : null;
    super(err ? `${err.name}: ${err.message}` : `HTTP ${status}: ${text}`);
    this.name = "RpcError";
    this.status = status;
    this.errorName = err ? err.name : null;
    this.errorMessage = err ? err.message : null;
    this.body = body;
  }
}

/** The URL path of an RPC; the DO name is encoded with encodeURIComponent like the client. */
export function rpcPath(binding, name, method) {
  return `/v1/rpc/${binding}/${encodeURIComponent(name)}/${method}`;
}

/**
 * Sends one RPC and returns {status, contentType, text, value}; `value` is the decoded body
 * (or undefined when the body is not valid tagged JSON). Never throws on HTTP errors.
 */
export async function rpcRaw({ url, secret, agent }, binding, name, method, args = []) {
  const headers = { "content-type": "application/json" };
  if (secret != null) headers.authorization = `Bearer ${secret}`;
  const target = new URL(rpcPath(binding, name, method), url);
  const res = agent ? await postWithAgent(agent, target, headers, encode(args)) : await fetchPost(target, headers, encode(args));
  const text = res.text;
  let value;
  try {
    value = decode(text);
  } catch {
    value = undefined;
  }
  return { status: res.status, contentType: res.contentType, text, value };
}

async function fetchPost(target, headers, body) {
  const res = await fetch(target, { method: "POST", headers, body });
  return { status: res.status, contentType: res.headers.get("content-type"), text: await res.text() };
}

/**
 * The same POST over node:http with a keep-alive agent. Node 20's fetch spends about a
 * millisecond of client CPU per request; benchmarks use this transport so that they
 * measure the worker rather than the client.
 */
function postWithAgent(agent, target, headers, body) {
  const bytes = Buffer.from(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: target.hostname, port: target.port, path: target.pathname, method: "POST", agent, headers: { ...headers, "content-length": bytes.length } },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode, contentType: res.headers["content-type"] ?? null, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(bytes);
  });
}

/** A keep-alive agent for {@link makeRpc} targets (`{url, secret, agent}`). */
export function keepAliveAgent(maxSockets = 64) {
  return new http.Agent({ keepAlive: true, maxSockets });
}

/** Sends one RPC; resolves with the decoded result, rejects with RpcError unless HTTP 200. */
export async function rpc(target, binding, name, method, args = []) {
  const r = await rpcRaw(target, binding, name, method, args);
  if (r.status !== 200) throw new RpcError(r.status, r.value, r.text);
  return r.value;
}

/** Binds a target ({url, secret}): returns `rpc(binding, name, method, args)`. */
export function makeRpc(target) {
  const fn = (binding, name, method, args = []) => rpc(target, binding, name, method, args);
  fn.raw = (binding, name, method, args = []) => rpcRaw(target, binding, name, method, args);
  return fn;
}
