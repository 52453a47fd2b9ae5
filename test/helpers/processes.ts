// Entry points run as real separate processes (`npm run api` / `npm run worker`) on a test stack's
// database, Temporal and task queue; resolves once the process says it is ready.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Stack } from './stack.js';

/** Anything with the environment of a stack: a Stack, or a test's own infrastructure. */
type WithEnv = Pick<Stack, 'env'>;

const READY_LINE = { api: 'api listening', worker: 'worker running' } as const;

export async function startEntryProcess(
  stack: WithEnv,
  entry: 'api' | 'worker',
  opts: { env?: Record<string, string>; track: ChildProcess[]; execArgv?: readonly string[] },
): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...(opts.execArgv ?? []), '--import', 'tsx', `src/${entry}-main.ts`], {
    env: { ...process.env, ...stack.env, LOG_LEVEL: 'info', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  opts.track.push(child);
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${entry} did not start: ${output}`)), 60_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      if (output.includes(READY_LINE[entry])) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${entry} exited (${code}): ${output}`)));
  });
  child.removeAllListeners('exit');
  child.stdout!.removeAllListeners('data');
  child.stderr!.removeAllListeners('data');
  // The rest of its output goes to a log beside the test data (kept with KEEP_TEST_DATA), for post-mortems.
  const tmp = process.env['TEST_TMP_DIR'];
  if (tmp) {
    const log = fs.createWriteStream(path.join(tmp, `${entry}-${child.pid}.log`));
    log.write(output);
    child.stdout!.pipe(log);
    child.stderr!.pipe(log);
  } else {
    child.stdout!.resume();
    child.stderr!.resume();
  }
  return child;
}

export function killAll(children: ChildProcess[]): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

/** Stops an entry process as an operator would (SIGTERM, its graceful shutdown: a --cpu-prof profile is written then); SIGKILL after `timeout_ms`. */
export async function stopGracefully(child: ChildProcess, timeout_ms = 30_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), timeout_ms);
  await exited;
  clearTimeout(timer);
}

/** A process started in its own process group (so a test can kill the whole tree, as a crash would). */
export interface TreeProcess {
  child: ChildProcess;
  /** Everything it printed so far, stdout and stderr. */
  output: () => string;
  exited: Promise<number | null>;
}

export function spawnTree(
  command: string,
  args: string[],
  opts: { cwd?: string; env: Record<string, string>; track: ChildProcess[] },
): TreeProcess {
  const child = spawn(command, args, {
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
    env: { ...process.env, LOG_LEVEL: 'warn', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  opts.track.push(child);
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => output, exited };
}

/** Sends `signal` to the process group of a spawnTree process; nothing if it is gone. */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // already gone
  }
}

/** Resolves once `npm start` (src/main.ts) has printed its ready lines; throws if it exits first. */
export async function untilStarted(p: TreeProcess, timeout_ms = 120_000): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!p.output().includes('Temporal UI:')) {
    if (p.child.exitCode !== null) throw new Error(`npm start exited: ${p.output()}`);
    if (Date.now() > deadline) throw new Error(`npm start not ready: ${p.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
