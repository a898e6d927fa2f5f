#!/usr/bin/env node
// npm run bench: benchmarks against the built worker (placeholder; workloads come later).
console.log("no benchmarks yet");
