// A webhook receiver for tests: a real HTTP server on a loopback port that records every request
// and answers each with the next scripted behaviour (then the default one).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  headers: Record<string, string>;
  body: string;
  at_ms: number;
}

/** How the receiver answers one request: a status (and headers), or never (the sender times out). */
export type Reply = { status: number; headers?: Record<string, string>; body?: string } | 'hang';

export interface Receiver {
  url: string;
  received: ReceivedWebhook[];
  /** Answers the next requests with these, in order; afterwards with `fallback`. */
  script: Reply[];
  fallback: Reply;
  /** Resolves once `n` requests have arrived. */
  waitFor(n: number, timeout_ms?: number): Promise<ReceivedWebhook[]>;
  close(): Promise<void>;
}

export async function startReceiver(opts: { script?: Reply[]; fallback?: Reply; path?: string } = {}): Promise<Receiver> {
  const received: ReceivedWebhook[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
      received.push({ headers, body: Buffer.concat(chunks).toString('utf8'), at_ms: Date.now() });
      for (const w of waiters.filter((w) => received.length >= w.n)) w.resolve();
      const reply = receiver.script.shift() ?? receiver.fallback;
      if (reply === 'hang') return; // never answered: closed by the sender's timeout
      res.writeHead(reply.status, reply.headers ?? {});
      res.end(reply.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const receiver: Receiver = {
    url: `http://127.0.0.1:${port}${opts.path ?? '/hooks'}`,
    received,
    script: [...(opts.script ?? [])],
    fallback: opts.fallback ?? { status: 204 },
    waitFor(n, timeout_ms = 30_000) {
      if (received.length >= n) return Promise.resolve(received.slice());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`receiver got ${received.length} of ${n} requests in ${timeout_ms} ms`)),
          timeout_ms,
        );
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve(received.slice());
          },
        });
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}
