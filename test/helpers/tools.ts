// The Go-built tools of the deployment tests (helm, promtool, deploy/validate): the path .ci/run
// exported, else the install script's (instant when cached; it builds the tool once otherwise).
import { execFileSync } from 'node:child_process';

export function toolPath(envVariable: 'HELM_PATH' | 'PROMTOOL_PATH' | 'K8S_VALIDATE_PATH', script: string): string {
  const fromEnv = process.env[envVariable];
  if (fromEnv) return fromEnv;
  return execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 30 * 60_000 }).trim();
}

/** Runs a tool; its exit status and what it printed (stdout and stderr together), never throwing. */
export function runTool(file: string, args: string[], opts: { input?: string; cwd?: string } = {}): { status: number; output: string; stdout: string } {
  try {
    const stdout = execFileSync(file, args, { encoding: 'utf8', input: opts.input, cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
    return { status: 0, output: stdout, stdout };
  } catch (err) {
    const e = err as { status?: number; stdout?: string; stderr?: string };
    return { status: e.status ?? 1, output: `${e.stdout ?? ''}${e.stderr ?? ''}`, stdout: e.stdout ?? '' };
  }
}
