// Every in-memory bound of a process, from the code's defaults (src/runtime/memory-bounds.ts), fits
// the memory limit the Helm chart gives that process, with MEMORY_HEADROOM of it left over.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import YAML from 'yaml';
import { apiMemoryBounds, MEMORY_HEADROOM, totalBytes, workerMemoryBounds, type MemoryBound } from '../../src/runtime/memory-bounds.js';

const values = YAML.parse(fs.readFileSync('deploy/helm/video-voice-api/values.yaml', 'utf8'));

/** A Kubernetes memory quantity (Mi, Gi, M, G or bytes) in bytes. */
function quantity(q: string): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(String(q));
  assert.ok(m, `a memory quantity: ${q}`);
  const unit = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, K: 1e3, M: 1e6, G: 1e9 }[m[2] as 'Mi'] ?? 1;
  return Number(m[1]) * unit;
}

const mib = (n: number) => `${Math.round(n / 1024 / 1024)} MiB`;
const describe = (bounds: MemoryBound[]) => bounds.map((b) => `  ${mib(b.bytes)}  ${b.what}`).join('\n');

for (const [process, bounds] of [
  ['api', apiMemoryBounds()],
  ['worker', workerMemoryBounds()],
] as const) {
  test(`${process}: every in-memory bound fits the chart's memory limit with ${MEMORY_HEADROOM * 100}% to spare`, () => {
    const limit = quantity(values[process].resources.limits.memory);
    const usable = limit * (1 - MEMORY_HEADROOM);
    const total = totalBytes(bounds);
    assert.ok(total <= usable, `${process}: ${mib(total)} of bounds over ${mib(usable)} usable of ${mib(limit)}:\n${describe(bounds)}`);
  });
}
