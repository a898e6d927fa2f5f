// `GET|POST /v1/streams/<name>/chunks` (spec-0.4 wire.md §5), reached through the router's
// `S<segment>` decision (src/shell/entry.rs) for an authenticated request; `rawSegment` is
// the `{name}` segment as received. Placeholder until the binary stream route lands.

export async function streamChunks(request, env, rawSegment) {
  const pathname = new URL(request.url).pathname;
  const body = JSON.stringify({ error: { name: "NotFound", message: `unknown path: ${pathname}` } });
  return new Response(body, { status: 404, headers: { "content-type": "application/json" } });
}
