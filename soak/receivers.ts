// The webhook receivers the soak's workspaces register, all on loopback: a prompt one that verifies
// every delivery's Standard Webhooks signature (with the reference library), a slow one (answers after
// 2-15 s, so some deliveries pass the 10 s limit and are retried), a failing one (answers every
// attempt 500) and a dead one (a port nothing listens on: every attempt is refused and retried).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { freePort } from '../test/helpers/infra.js';
import type { Rng } from './rng.js';

export interface Receivers {
  /** The prompt receiver's URL for a workspace (its path names the workspace). */
  promptUrl(workspace: string): string;
  slowUrl: string;
  failingUrl: string;
  deadUrl: string;
  /** The secret the prompt receiver verifies a workspace's deliveries with. */
  setSecret(workspace: string, secret: string): void;
  stats: { prompt: number; slow: number; failing: number; badSignatures: string[]; eventIds: Set<string> };
  /** The ids of the jobs whose events reached the prompt receiver, verified, by workspace. */
  jobsNotified(workspace: string): Set<string>;
  close(): Promise<void>;
}

async function listen(handler: http.RequestListener): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve(Buffer.concat(chunks)));
  });
}

export async function startReceivers(rng: Rng): Promise<Receivers> {
  const secrets = new Map<string, string>();
  const stats: Receivers['stats'] = { prompt: 0, slow: 0, failing: 0, badSignatures: [], eventIds: new Set() };
  const notified = new Map<string, Set<string>>();
  const prompt = await listen(async (req, res) => {
    const body = await readBody(req);
    stats.prompt++;
    const workspace = decodeURIComponent((req.url ?? '').split('/').pop() ?? '');
    const secret = secrets.get(workspace);
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    try {
      if (!secret) throw new Error('no endpoint registered for this path');
      const event = new Webhook(secret).verify(body, headers) as { data?: { id?: string } };
      stats.eventIds.add(headers['webhook-id']!);
      if (event.data?.id) {
        if (!notified.has(workspace)) notified.set(workspace, new Set());
        notified.get(workspace)!.add(event.data.id);
      }
    } catch (err) {
      stats.badSignatures.push(`${workspace}: ${(err as Error).message}`);
    }
    res.writeHead(204).end();
  });
  const slowTimers = new Set<NodeJS.Timeout>();
  const slow = await listen(async (req, res) => {
    await readBody(req);
    stats.slow++;
    const timer = setTimeout(
      () => {
        slowTimers.delete(timer);
        res.writeHead(200).end();
      },
      rng.int(2_000, 15_000),
    );
    slowTimers.add(timer);
  });
  const failing = await listen(async (req, res) => {
    await readBody(req);
    stats.failing++;
    res.writeHead(500).end('receiver down');
  });
  const deadPort = await freePort(); // nothing listens there
  return {
    promptUrl: (workspace) => `http://127.0.0.1:${prompt.port}/hooks/${encodeURIComponent(workspace)}`,
    slowUrl: `http://127.0.0.1:${slow.port}/slow`,
    failingUrl: `http://127.0.0.1:${failing.port}/failing`,
    deadUrl: `http://127.0.0.1:${deadPort}/dead`,
    setSecret: (workspace, secret) => secrets.set(workspace, secret),
    jobsNotified: (workspace) => notified.get(workspace) ?? new Set(),
    stats,
    async close() {
      for (const t of slowTimers) clearTimeout(t);
      for (const { server } of [prompt, slow, failing]) {
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
      }
    },
  };
}
