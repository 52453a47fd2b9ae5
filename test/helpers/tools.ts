// The Go-built tools of the deployment tests (helm, promtool, deploy/validate) and squawk: the path .ci/run
// exported, else the install script's (instant when cached; it builds the tool once otherwise).
import { execFileSync, spawnSync } from 'node:child_process';

export function toolPath(envVariable: 'HELM_PATH' | 'PROMTOOL_PATH' | 'K8S_VALIDATE_PATH' | 'SQUAWK_PATH', script: string): string {
  const fromEnv = process.env[envVariable];
  if (fromEnv) return fromEnv;
  return execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 30 * 60_000 }).trim();
}

/**
 * Why the Go-built tools named by `envVariables` cannot be had on this machine (no path given and no Go
 * to build them: a normal user's `npm test` on a machine without Go), or undefined when they can. CI
 * (.ci/run) builds them and sets the variables, so there the tests run.
 */
export function goToolsMissing(envVariables: readonly string[], tools: string): string | undefined {
  if (envVariables.every((name) => process.env[name])) return undefined;
  if (!spawnSync('go', ['version']).error) return undefined;
  return `Go is needed to build ${tools} (install Go, or run bash .ci/run); ${envVariables.join(', ')} not set`;
}

/** Runs a tool; its exit status and what it printed (stdout, and stdout with stderr), never throwing. */
export function runTool(
  file: string,
  args: string[],
  opts: { input?: string; cwd?: string; env?: NodeJS.ProcessEnv } = {},
): { status: number; output: string; stdout: string } {
  const r = spawnSync(file, args, { encoding: 'utf8', input: opts.input, cwd: opts.cwd, env: opts.env, maxBuffer: 64 << 20 });
  if (r.error) throw r.error;
  return { status: r.status ?? 1, output: `${r.stdout}${r.stderr}`, stdout: r.stdout };
}
