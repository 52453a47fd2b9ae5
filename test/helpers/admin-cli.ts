// Runs the admin CLI (src/admin-cli.ts) as a process against a running API, as an operator would.
import { spawn } from 'node:child_process';
import { ADMIN_TOKEN } from './stack.js';

export function adminCli(baseUrl: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/admin-cli.ts', ...args], {
    env: { ...process.env, API_URL: baseUrl, ADMIN_TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
}
