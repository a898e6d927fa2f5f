// A raw HTTP/1.1 client over net.Socket. The request line, the header bytes and the body are
// written exactly as given: no path normalisation (`//v1/health`, `%2F` stay verbatim), no
// header trimming (a trailing space or tab in a value is sent), no accept-encoding.
//
//   const res = await rawRequest({ host, port, method: "POST", path: "/v1/rpc/...",
//     headers: [["authorization", "Bearer x "]], body: Buffer.from("[]") });
//   res.status, res.headers (lower-cased names; repeated names joined by ", "), res.body (Buffer)
//
// body:       Buffer | string | null (null: no body, no content-length)
// synthetic:  {prefix?, fill, suffix?, length} — a generated body streamed in slices
// chunked:    send with transfer-encoding: chunked instead of content-length
// headWaitMs: for bodies sent with content-length, wait up to this long for an early
//             response after the headers before writing the body (a server may answer 413
//             from the header alone and close)
// A request whose response is complete resolves even if writing the body later fails.

import net from "node:net";

const SLICE = 1 << 20; // 1 MiB

/** Yields the bytes of a synthetic body slice by slice. */
export function* syntheticSlices({ prefix = "", fill, suffix = "", length }, sliceSize = SLICE) {
  const pre = Buffer.from(prefix, "utf8");
  const suf = Buffer.from(suffix, "utf8");
  const fillByte = Buffer.from(fill, "utf8");
  if (fillByte.length !== 1) throw new Error("synthetic fill must be one byte");
  const sufStart = length - suf.length;
  for (let off = 0; off < length; off += sliceSize) {
    const n = Math.min(sliceSize, length - off);
    const buf = Buffer.alloc(n, fillByte[0]);
    // Overlay prefix and suffix where they intersect this slice.
    for (let i = 0; i < pre.length; i++) if (i >= off && i < off + n) buf[i - off] = pre[i];
    for (let i = 0; i < suf.length; i++) {
      const pos = sufStart + i;
      if (pos >= off && pos < off + n) buf[pos - off] = suf[i];
    }
    yield buf;
  }
}

class ResponseParser {
  constructor(method) {
    this.method = method;
    this.buf = Buffer.alloc(0);
    this.head = null;
    this.done = false;
    this.body = null;
  }

  push(chunk) {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    this.tryParse(false);
  }

  end() {
    this.tryParse(true);
  }

  tryParse(eof) {
    if (this.done) return;
    if (!this.head) {
      const idx = this.buf.indexOf("\r\n\r\n");
      if (idx < 0) return;
      const lines = this.buf.subarray(0, idx).toString("latin1").split("\r\n");
      const m = lines[0].match(/^HTTP\/\d\.\d (\d{3})(?: (.*))?$/);
      if (!m) throw new Error(`bad status line: ${JSON.stringify(lines[0])}`);
      const headers = {};
      for (const line of lines.slice(1)) {
        const c = line.indexOf(":");
        if (c < 0) continue;
        const name = line.slice(0, c).trim().toLowerCase();
        const value = line.slice(c + 1).trim();
        headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
      }
      const status = Number(m[1]);
      this.buf = this.buf.subarray(idx + 4);
      if (status >= 100 && status < 200) {
        // Interim response (100 Continue): skip it.
        return this.tryParse(eof);
      }
      this.head = { status, statusText: m[2] || "", headers };
    }
    const { status, headers } = this.head;
    if (this.method === "HEAD" || status === 204 || status === 304) {
      return this.finish(Buffer.alloc(0));
    }
    if (/\bchunked\b/i.test(headers["transfer-encoding"] || "")) {
      const parts = [];
      let pos = 0;
      for (;;) {
        const lineEnd = this.buf.indexOf("\r\n", pos);
        if (lineEnd < 0) break;
        const size = parseInt(this.buf.subarray(pos, lineEnd).toString("latin1"), 16);
        if (Number.isNaN(size)) throw new Error("bad chunk size");
        if (size === 0) return this.finish(Buffer.concat(parts));
        if (this.buf.length < lineEnd + 2 + size + 2) break;
        parts.push(this.buf.subarray(lineEnd + 2, lineEnd + 2 + size));
        pos = lineEnd + 2 + size + 2;
      }
      if (eof) throw new Error("connection closed inside a chunked response body");
      return;
    }
    if (headers["content-length"] !== undefined) {
      const n = Number(headers["content-length"]);
      if (this.buf.length >= n) return this.finish(this.buf.subarray(0, n));
      if (eof) throw new Error(`connection closed after ${this.buf.length} of ${n} body bytes`);
      return;
    }
    if (eof) this.finish(this.buf);
  }

  finish(body) {
    this.body = Buffer.from(body);
    this.done = true;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function rawRequest(opts) {
  const {
    host = "127.0.0.1",
    port,
    method,
    path,
    headers = [],
    body = null,
    synthetic = null,
    chunked = false,
    headWaitMs = 500,
    timeoutMs = 30000,
  } = opts;
  return new Promise((resolvePromise, rejectPromise) => {
    const parser = new ResponseParser(method);
    const socket = net.connect({ host, port });
    socket.setNoDelay(true);
    let settled = false;
    let writeError = null;
    const timer = setTimeout(() => fail(new Error(`timeout after ${timeoutMs} ms`)), timeoutMs);

    function succeed() {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolvePromise({
        status: parser.head.status,
        statusText: parser.head.statusText,
        headers: parser.head.headers,
        body: parser.body,
        writeError,
      });
    }
    function fail(err) {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      rejectPromise(err);
    }
    function feed(fn) {
      try {
        fn();
      } catch (err) {
        return fail(err);
      }
      if (parser.done) succeed();
    }

    socket.on("data", (chunk) => feed(() => parser.push(chunk)));
    socket.on("end", () => feed(() => parser.end()));
    socket.on("close", () => {
      if (!settled) feed(() => parser.end());
      if (!settled) fail(writeError || new Error("connection closed before a complete response"));
    });
    socket.on("error", (err) => {
      // A reset while we are still writing is expected after an early answer.
      writeError = err;
    });

    const bodyBuf = body == null ? null : Buffer.isBuffer(body) ? body : Buffer.from(body, "utf8");
    const length = synthetic ? synthetic.length : bodyBuf ? bodyBuf.length : null;
    let head = `${method} ${path} HTTP/1.1\r\nhost: ${host}:${port}\r\n`;
    for (const [name, value] of headers) head += `${name}: ${value}\r\n`;
    if (chunked) head += "transfer-encoding: chunked\r\n";
    else if (length !== null) head += `content-length: ${length}\r\n`;
    head += "connection: close\r\n\r\n";
    const headBuf = Buffer.from(head, "utf8");

    const writeAsync = (buf) =>
      new Promise((res) => {
        if (settled || socket.destroyed) return res(false);
        const ok = socket.write(buf, (err) => {
          if (err) writeError = err;
        });
        if (ok) return res(true);
        const onDrain = () => {
          cleanup();
          res(true);
        };
        const onGone = () => {
          cleanup();
          res(false);
        };
        const cleanup = () => {
          socket.off("drain", onDrain);
          socket.off("close", onGone);
        };
        socket.once("drain", onDrain);
        socket.once("close", onGone);
      });

    socket.once("connect", async () => {
      try {
        if (!synthetic) {
          if (chunked) {
            const parts = [headBuf];
            if (bodyBuf && bodyBuf.length) {
              parts.push(Buffer.from(`${bodyBuf.length.toString(16)}\r\n`), bodyBuf, Buffer.from("\r\n"));
            }
            parts.push(Buffer.from("0\r\n\r\n"));
            await writeAsync(Buffer.concat(parts));
          } else {
            await writeAsync(bodyBuf ? Buffer.concat([headBuf, bodyBuf]) : headBuf);
          }
          return;
        }
        await writeAsync(headBuf);
        if (!chunked && headWaitMs > 0) {
          const until = Date.now() + headWaitMs;
          while (!settled && Date.now() < until) await sleep(10);
        }
        for (const slice of syntheticSlices(synthetic)) {
          if (settled || socket.destroyed) return;
          const buf = chunked
            ? Buffer.concat([Buffer.from(`${slice.length.toString(16)}\r\n`), slice, Buffer.from("\r\n")])
            : slice;
          if (!(await writeAsync(buf))) return;
        }
        if (chunked && !settled) await writeAsync(Buffer.from("0\r\n\r\n"));
      } catch (err) {
        writeError = err;
      }
    });
  });
}
