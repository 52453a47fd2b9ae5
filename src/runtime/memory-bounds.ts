// What each kind of process may hold in memory at once, from the bounds the code sets, for checking
// against the memory the Helm chart gives it (test/platform/memory-bounds.test.ts reads the chart's
// limits). Each entry is a worst case the code enforces; the baselines are what a process holds
// at rest (Node, the loaded modules, pools, caches), measured with some margin. A bound that grows
// here must fit the chart's limit with MEMORY_HEADROOM of it left over, or the chart's limit grows too.
import { CONCURRENT_OUTPUT_COPIES_MAX } from '../video-jobs/job-steps.js';
import { THUMBNAIL_VIDEO_BYTES_MAX } from '../media/thumbnails.js';
import { VIDEO_OUTPUT_BYTES_MAX } from '../providers/video/types.js';
import { VIDEO_PROVIDERS } from '../providers/registry.js';

const MIB = 1024 * 1024;

/** The share of a process's memory limit left free of every bound (fragmentation, GC, what no bound covers). */
export const MEMORY_HEADROOM = 0.25;

export interface MemoryBound {
  what: string;
  bytes: number;
}

/**
 * An API process: at rest, then the largest things it holds at once. A thumbnail's MP4 is read into
 * one buffer and moved to the FFmpeg worker (one decode at a time per process); FFmpeg runs on a fresh
 * WebAssembly instance per command with the next one made ahead (two instances, each its heap for a
 * 4K frame's decode and encode).
 */
export function apiMemoryBounds(): MemoryBound[] {
  return [
    { what: 'baseline: Node, the modules, the pool and caches of an API process at rest', bytes: 224 * MIB },
    { what: 'the FFmpeg worker thread: its compiled module and two instances decoding up to a 4K frame', bytes: 192 * MIB },
    { what: "a thumbnail's MP4, read once and moved to FFmpeg (one decode at a time)", bytes: THUMBNAIL_VIDEO_BYTES_MAX },
  ];
}

/**
 * A worker process: at rest (Temporal's core, the workflow bundle and its cache), then the outputs it
 * copies from providers at once, each read whole (its chunks and their concatenation: twice its size).
 */
export function workerMemoryBounds(): MemoryBound[] {
  return [
    { what: 'baseline: Node, the Temporal worker and its workflow cache, the pool', bytes: 384 * MIB },
    {
      what: `provider outputs copied at once (${CONCURRENT_OUTPUT_COPIES_MAX}), each read whole: twice its largest size`,
      bytes: CONCURRENT_OUTPUT_COPIES_MAX * 2 * VIDEO_OUTPUT_BYTES_MAX,
    },
    // What each video provider's adapter holds besides (Vertex AI's inline videos), from its descriptor.
    ...VIDEO_PROVIDERS.flatMap((d) => d.capabilities.memory_held),
  ];
}

export const totalBytes = (bounds: MemoryBound[]) => bounds.reduce((sum, b) => sum + b.bytes, 0);
