// Workload "streams-binary": the 0.4 binary stream route next to the 0.3 JSON methods, for
// 64 KiB and 1 MiB chunks. Per case: write TOTAL_MIB, then read it back (bytes checked),
// printing MB/s and the workerd's CPU per MiB of each phase. Figures are printed, never
// asserted.
//
// Binary: POST /v1/streams/<name>/chunks with WCSW batches of 32 chunks (1 MiB chunks: 8
// per batch, the 8 MiB batch limit), GET reads of maxChunks 32 / maxBytes 8 MiB.
// JSON: streams.writeChunk one chunk per call, streams.getChunks pages of 32 (the JSON
// response budget may shorten a page).

import { cpuDelta, sampleCpu } from "./proc.mjs";

const TYPE = "application/vnd.world-celld.stream-batch.v1";
const TOTAL_MIB = 16;
const CASES = [64 * 1024, 1024 * 1024];

function chunkBytes(i, size) {
  const b = new Uint8Array(size);
  b.fill(i & 0xff);
  b[0] = (i >> 8) & 0xff;
  b[size - 1] = 0xa5;
  return b;
}

function frame(chunks) {
  const size = 8 + chunks.reduce((n, c) => n + 4 + c.length, 0);
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  out.set([0x57, 0x43, 0x53, 0x57, 0, 1]);
  view.setUint16(6, chunks.length);
  let at = 8;
  for (const c of chunks) {
    view.setUint32(at, c.length);
    out.set(c, at + 4);
    at += 4 + c.length;
  }
  return out;
}

/** The chunks of a WCSR frame (views into `b`). */
function readFrameChunks(b) {
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (view.getUint32(0) !== 0x57435352) throw new Error("not a WCSR frame");
  const count = view.getUint32(16);
  const chunks = [];
  let at = 28;
  for (let i = 0; i < count; i++) {
    const len = view.getUint32(at);
    chunks.push(b.subarray(at + 4, at + 4 + len));
    at += 4 + len;
  }
  return chunks;
}

function check(got, want, i) {
  if (got.length !== want.length || got[0] !== want[0] || got[got.length - 1] !== want[want.length - 1] || got[1] !== want[1]) {
    throw new Error(`chunk ${i} differs`);
  }
}

async function phase(proc, fn) {
  const a = proc && sampleCpu(proc);
  const t0 = performance.now();
  await fn();
  const s = (performance.now() - t0) / 1000;
  return { s, cpuMs: proc ? cpuDelta(a, sampleCpu(proc)).ms : NaN };
}

function line(label, mib, p) {
  const cpu = Number.isNaN(p.cpuMs) ? "" : `, server CPU ${(p.cpuMs / mib).toFixed(1)} ms/MiB`;
  return `${label}: ${mib} MiB in ${p.s.toFixed(2)} s = ${(mib / p.s).toFixed(1)} MB/s${cpu}`;
}

export async function streamsBinaryWorkload(worker, { proc } = {}) {
  const base = worker.url.replace(/\/$/, "");
  const auth = { authorization: `Bearer ${worker.secret}` };
  const out = [];
  for (const size of CASES) {
    const n = (TOTAL_MIB * 1024 * 1024) / size;
    const perBatch = Math.min(32, Math.floor(8388608 / size));
    const chunks = Array.from({ length: n }, (_, i) => chunkBytes(i, size));
    const kib = `${size / 1024} KiB`;
    const runId = `wrun_bench_bin_${size}_${Date.now().toString(36)}`;

    // Binary route.
    const path = `${base}/v1/streams/${encodeURIComponent(`stream:bin-${runId}`)}/chunks`;
    const w = await phase(proc, async () => {
      for (let i = 0; i < n; i += perBatch) {
        const r = await fetch(`${path}?runId=${runId}`, { method: "POST", headers: { ...auth, "content-type": TYPE }, body: frame(chunks.slice(i, i + perBatch)) });
        const ack = new Uint8Array(await r.arrayBuffer());
        if (r.status !== 200 || ack.length !== 16) throw new Error(`binary write ${i}: ${r.status} ${new TextDecoder().decode(ack)}`);
      }
    });
    const r = await phase(proc, async () => {
      let at = 0;
      while (at < n) {
        const resp = await fetch(`${path}?runId=${runId}&startIndex=${at}&maxChunks=32&maxBytes=8388608&waitMs=0`, { headers: auth });
        const got = readFrameChunks(new Uint8Array(await resp.arrayBuffer()));
        if (got.length === 0) throw new Error(`binary read stalled at ${at}`);
        for (const c of got) check(c, chunks[at], at++);
      }
    });
    out.push(line(`streams-binary: binary write ${kib} chunks (${perBatch}/batch)`, TOTAL_MIB, w));
    out.push(line(`streams-binary: binary read  ${kib} chunks (≤32/read, ≤8 MiB)`, TOTAL_MIB, r));

    // 0.3 JSON methods.
    const name = `stream:json-${runId}`;
    const jw = await phase(proc, async () => {
      for (let i = 0; i < n; i++) {
        const index = await worker.rpc("streams", name, "writeChunk", [runId, chunks[i]]);
        if (index !== i) throw new Error(`writeChunk ${i} returned ${index}`);
      }
    });
    const jr = await phase(proc, async () => {
      let at = 0;
      while (at < n) {
        const page = await worker.rpc("streams", name, "getChunks", [{ startIndex: at, limit: 32 }]);
        if (page.chunks.length === 0) throw new Error(`getChunks stalled at ${at}`);
        for (const c of page.chunks) check(c, chunks[at], at++);
      }
    });
    out.push(line(`streams-binary: JSON writeChunk ${kib} chunks (1/call)`, TOTAL_MIB, jw));
    out.push(line(`streams-binary: JSON getChunks  ${kib} chunks (≤32/page)`, TOTAL_MIB, jr));
  }
  return out;
}
