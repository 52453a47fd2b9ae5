// A child process running one subject of the benchmark (argv[2]: bare | floor | product | product-api | product-worker | rowread | speechrelay), driven by
// its parent over IPC (bench/subject.ts). Started with --expose-gc, so memory is measured after a GC.
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { startBareExpress } from './bare-express.js';
import { startFloor } from './floor-server.js';
import { startProduct } from './product-server.js';
import { startRowReadFloor } from './row-read-server.js';
import { startSpeechRelayFloor } from './speech-relay-floor.js';
import { formatTimings, installTimings } from './create-path-timing.js';
import type { FromSubject, MemoryParts, RunningSubject, SubjectKind, ToSubject } from './subject.js';

const send = (m: FromSubject) => void process.send!(m);
/** Sends `m`, then exits once it is on its way. */
const sendAndExit = (m: FromSubject, code: number) => process.send!(m, undefined, {}, () => process.exit(code));

async function start(kind: SubjectKind): Promise<RunningSubject> {
  switch (kind) {
    case 'bare':
      return startBareExpress();
    case 'floor':
      return startFloor(process.env);
    case 'product':
      return startProduct(process.env);
    case 'product-api':
      return startProduct(process.env, 'api');
    case 'product-worker':
      return startProduct(process.env, 'worker');
    case 'rowread':
      return startRowReadFloor(process.env);
    case 'speechrelay':
      return startSpeechRelayFloor(process.env);
  }
}

/** Memory once garbage is collected: a few collections apart, so what finalisers free goes too. */
async function settledMemory(): Promise<FromSubject> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) {
    gc?.();
    await sleep(200);
  }
  const m = process.memoryUsage();
  return { type: 'memory', rss_bytes: m.rss, heap_used_bytes: m.heapUsed, parts: memoryParts(m) };
}

/**
 * The parts of the RSS this process can name: its V8 heaps (this thread's and, from a diagnostic report,
 * every worker thread's, such as the workflow threads, which the gc() above does not reach), the memory
 * V8 is told of outside them, and its native threads (each may hold a malloc arena).
 */
function memoryParts(m: NodeJS.MemoryUsage): MemoryParts {
  (process.report as { excludeNetwork?: boolean }).excludeNetwork = true; // no address lookups of its sockets
  const report = process.report.getReport() as unknown as {
    javascriptHeap: { totalCommittedMemory: number };
    workers: { javascriptHeap: { totalCommittedMemory: number } }[];
  };
  const threads = /^Threads:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return {
    main_heap_bytes: report.javascriptHeap.totalCommittedMemory,
    worker_heap_bytes: report.workers.reduce((sum, w) => sum + w.javascriptHeap.totalCommittedMemory, 0),
    worker_threads: report.workers.length,
    external_bytes: m.external,
    threads: threads ? Number(threads[1]) : 0,
  };
}

async function main() {
  const kind = process.argv[2] as SubjectKind;
  if (!['bare', 'floor', 'product', 'product-api', 'product-worker', 'rowread', 'speechrelay'].includes(kind))
    throw new Error(`unknown subject ${kind}`);
  const profile = process.env['BENCH_PROFILE'] === '1';
  if (profile) installTimings();
  const subject = await start(kind);
  process.on('message', (m: ToSubject) => {
    if (m.type === 'memory') void settledMemory().then(send);
    if (m.type === 'stop') {
      if (profile) process.stderr.write(formatTimings(kind));
      void subject.stop().finally(() => sendAndExit({ type: 'stopped' }, 0));
    }
  });
  // The parent is gone: nothing will stop this process otherwise.
  process.on('disconnect', () => process.exit(1));
  send({ type: 'ready', url: subject.url });
}

main().catch((err) => {
  sendAndExit({ type: 'failed', message: `${process.argv[2]} subject failed to start: ${(err as Error).stack ?? err}` }, 1);
});
