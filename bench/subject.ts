// The benchmark's subjects (bare Express, the engine's floor, the product, the status read's floor, speech's relay floor) each run in a child process
// of their own, so the load generator never shares an event loop with what it measures. This is the
// parent's side: start one, ask it for its memory after a garbage collection, stop it.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export type SubjectKind = 'bare' | 'floor' | 'product' | 'product-api' | 'product-worker' | 'rowread' | 'speechrelay';

export interface RunningSubject {
  url: string;
  stop(): Promise<void>;
}

export interface SubjectMemory {
  rss_bytes: number;
  heap_used_bytes: number;
  /**
   * Where the RSS is (absent from a subject that does not report it): the main thread's V8 heap
   * (committed), the worker threads' V8 heaps (the workflow threads; committed, summed), the buffers and
   * other memory V8 is told of (external), and the native threads of the process. The rest of the RSS
   * is native memory V8 does not see (Temporal's core, malloc arenas, code).
   */
  parts?: MemoryParts;
}

export interface MemoryParts {
  main_heap_bytes: number;
  worker_heap_bytes: number;
  worker_threads: number;
  external_bytes: number;
  threads: number;
}

export type ToSubject = { type: 'memory' } | { type: 'stop' };
export type FromSubject =
  { type: 'ready'; url: string } | { type: 'failed'; message: string } | ({ type: 'memory' } & SubjectMemory) | { type: 'stopped' };

export interface SubjectProcess {
  kind: SubjectKind;
  url: string;
  pid: number;
  /** RSS and heap after a settled garbage collection (the child runs with --expose-gc). */
  memory(): Promise<SubjectMemory>;
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 180_000; // the workflow bundle is built at start, on a loaded 2-core machine
const STOP_TIMEOUT_MS = 60_000;
const MEMORY_TIMEOUT_MS = 30_000;

export async function spawnSubject(
  kind: SubjectKind,
  env: NodeJS.ProcessEnv,
  opts: { cpuProfDir?: string | undefined; nodePath?: string | undefined } = {},
): Promise<SubjectProcess> {
  const execArgv = ['--import', 'tsx', '--expose-gc', ...(opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : [])];
  const child = fork(fileURLToPath(new URL('./subject-process.ts', import.meta.url)), [kind], {
    env,
    execArgv,
    // Another Node than the bench's own (phase 7 compares Node lines); the default is this process's.
    ...(opts.nodePath ? { execPath: opts.nodePath } : {}),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<string>((resolve) =>
    child.once('exit', (code, signal) => resolve(`${kind} subject exited (${signal ?? code})`)),
  );
  const url = await answer(child, exited, 'ready', START_TIMEOUT_MS).then((m) => m.url);
  return {
    kind,
    url,
    pid: child.pid!,
    async memory() {
      child.send({ type: 'memory' } satisfies ToSubject);
      const m = await answer(child, exited, 'memory', MEMORY_TIMEOUT_MS);
      return { rss_bytes: m.rss_bytes, heap_used_bytes: m.heap_used_bytes, ...(m.parts ? { parts: m.parts } : {}) };
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.send({ type: 'stop' } satisfies ToSubject);
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The child's next message of `type`; fails if it reports a failure, exits or says nothing in time. */
function answer<T extends FromSubject['type']>(
  child: ChildProcess,
  exited: Promise<string>,
  type: T,
  timeout_ms: number,
): Promise<Extract<FromSubject, { type: T }>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error(`no ${type} answer from the subject within ${timeout_ms} ms`)), timeout_ms);
    const onMessage = (m: FromSubject) => {
      if (m.type === type) finish(null, m as Extract<FromSubject, { type: T }>);
      else if (m.type === 'failed') finish(new Error(m.message));
    };
    const finish = (err: Error | null, m?: Extract<FromSubject, { type: T }>) => {
      clearTimeout(timer);
      child.off('message', onMessage);
      if (err) {
        if (child.exitCode === null) child.kill('SIGKILL');
        reject(err);
      } else resolve(m!);
    };
    child.on('message', onMessage);
    void exited.then((why) => finish(new Error(why)));
  });
}
