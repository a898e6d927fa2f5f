// The router's pathname shortcut (src/shell/path.mjs) gives what `new URL(url).pathname`
// gives, for the URLs a runtime hands the router.
import assert from "node:assert/strict";
import { test } from "node:test";
import { pathnameOf } from "../src/shell/path.mjs";

test("pathnameOf agrees with the URL parser", () => {
  const paths = [
    "/v1/health", "/", "/v1/rpc/runs/wrun_1/getRun", "/v1/rpc/streams/stream%3Afoo/writeChunk",
    "//v1//health/", "/v1/./health", "/v1/../v1/health", "/v1/%2e%2e/health", "/v1/%2E/health",
    "/v1/rpc/index/a%2Fb/get", "/v1/rpc/runs/%E0%A4%A/getRun", "/a?b=c", "/a#frag", "/a?b#c", "/a#b?c",
    "/v1/rpc/runs/x y/getRun", "/v1/rpc/runs/é/getRun", "/v1\\health", "/.hidden", "/v1/rpc/q/%3A0/enqueue",
  ];
  for (const host of ["http://127.0.0.1:8787", "https://world.example.workers.dev"]) {
    for (const p of paths) {
      const url = new URL(p, host).href;
      assert.equal(pathnameOf(url), new URL(url).pathname, url);
    }
  }
});
