// Reading a request body under a size limit, shared by the RPC/index routes (entry.mjs,
// 32 MiB) and the binary stream route (stream_route.mjs, 8 MiB + 1 KiB).

const DECIMAL = /^[0-9]{1,16}$/;

/**
 * The body as bytes, or null once it exceeds `limit` (counted while streaming, whatever
 * the headers say). `contentLength` is the request's `content-length` header (or null).
 */
export async function readLimited(request, contentLength, limit) {
  // Decided in JavaScript for speed: a declared length within the limit is one native read, no counting loop.
  // A content-length within the limit (the route refused larger ones): the platform
  // delivers exactly that many bytes, and one native read costs a fraction of a loop over
  // the stream's pieces (measured: 0.6 against 6.5 ms CPU per MiB).
  if (contentLength !== null && DECIMAL.test(contentLength) && +contentLength <= limit) return new Uint8Array(await request.arrayBuffer());
  if (request.body === null) return new Uint8Array(0);
  const reader = request.body.getReader();
  const parts = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      return null;
    }
    parts.push(value);
  }
  // One piece that is its whole buffer is the body as it is (no copy; and no larger
  // backing buffer travels with it over an RPC hop).
  const [only] = parts;
  if (parts.length === 1 && only.byteOffset === 0 && only.byteLength === only.buffer.byteLength) return only;
  const body = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    body.set(p, at);
    at += p.byteLength;
  }
  return body;
}
