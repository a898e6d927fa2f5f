// Workload "streams": one stream of 512 chunks x 16 KiB written, then read back with
// getChunks pages; bytes verified.

const CHUNKS = 512;
const CHUNK_BYTES = 16 * 1024;
const PAGE = 64;

function chunkBytes(i) {
  const b = new Uint8Array(CHUNK_BYTES);
  for (let j = 0; j < CHUNK_BYTES; j++) b[j] = (i * 31 + j) & 0xff;
  return b;
}

export async function streamsWorkload(worker) {
  const runId = `wrun_bench_stream_${Date.now().toString(36)}`;
  const name = `stream:bench-${runId}`;
  const chunks = Array.from({ length: CHUNKS }, (_, i) => chunkBytes(i));
  const mb = (CHUNKS * CHUNK_BYTES) / (1024 * 1024);

  let t0 = performance.now();
  for (let i = 0; i < CHUNKS; i++) {
    const index = await worker.rpc("streams", name, "writeChunk", [runId, chunks[i]]);
    if (index !== i) throw new Error(`writeChunk ${i} returned ${index}`);
  }
  await worker.rpc("streams", name, "closeStream", [runId]);
  const writeS = (performance.now() - t0) / 1000;

  t0 = performance.now();
  let read = 0;
  let done = false;
  while (!done || read < CHUNKS) {
    const page = await worker.rpc("streams", name, "getChunks", [{ startIndex: read, limit: PAGE }]);
    for (const c of page.chunks) {
      const want = chunks[read];
      if (!(c instanceof Uint8Array) || c.length !== want.length || !c.every((v, j) => v === want[j])) {
        throw new Error(`chunk ${read} differs`);
      }
      read++;
    }
    done = page.done;
    if (page.chunks.length === 0) break;
  }
  const readS = (performance.now() - t0) / 1000;
  if (read !== CHUNKS) throw new Error(`read back ${read} of ${CHUNKS} chunks`);
  return [
    `streams: wrote ${CHUNKS} x ${CHUNK_BYTES / 1024} KiB (${mb} MiB) in ${writeS.toFixed(2)} s = ${(mb / writeS).toFixed(1)} MB/s`,
    `streams: read back in ${readS.toFixed(2)} s = ${(mb / readS).toFixed(1)} MB/s, ${read} chunks verified byte for byte`,
  ];
}
