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
  opts: { env?: Record<string, string>; track: ChildProcess[] },
): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', `src/${entry}-main.ts`], {
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
