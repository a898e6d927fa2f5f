// The router → Durable Object hop (see src/protocol/hop.rs), used by the router (entry.mjs) and by
// the Rust side's DO-to-DO calls (src/shell/call.rs): workerd's JavaScript RPC
// `rpc(method, name, body)` on the instance's stub, answered `[status, body, alarm]`. A
// body too large for one RPC argument (workerd caps serialized arguments at 32 MiB) makes
// the same call over `stub.fetch`.

/** Largest body sent as an RPC argument; larger ones go over fetch. */
export const RPC_BODY_LIMIT = 30 * 1024 * 1024;

/** Call `method` on instance `name` of namespace `ns` with the body bytes. */
export function hop(ns, name, method, body) {
  // `getByName` is `get(idFromName(name))` in one call (one crossing, no id object).
  const stub = ns.getByName(name);
  if (body.byteLength <= RPC_BODY_LIMIT) return stub.rpc(method, name, body);
  return fetchHop(stub, method, name, body);
}

async function fetchHop(stub, method, name, body) {
  const resp = await stub.fetch("https://celld.internal/rpc", {
    method: "POST",
    headers: { "x-celld-method": method, "x-celld-name": encodeURIComponent(name) },
    body,
  });
  return [resp.status, new Uint8Array(await resp.arrayBuffer())];
}
