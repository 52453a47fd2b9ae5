// Entry points run as real separate processes (`npm run api` / `npm run worker`) on a test stack's
// database, Temporal and task queue; resolves once the process says it is ready.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Stack } from './stack.js';

const READY_LINE = { api: 'api listening', worker: 'worker running' } as const;

export async function startEntryProcess(
  stack: Stack,
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
  child.stdout!.removeAllListeners('data').resume();
  child.stderr!.removeAllListeners('data').resume();
  return child;
}

export function killAll(children: ChildProcess[]): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}
