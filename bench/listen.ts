// Serves an Express app on a free loopback port with the HTTP server settings of the product's API
// (src/runtime.ts), so every subject of the create benchmark pays the same HTTP cost.
import http from 'node:http';
import type { Express } from 'express';

export interface Listening {
  url: string;
  /** The server itself (a WebSocket server may share it). */
  server: http.Server;
  close(): Promise<void>;
}

export async function listen(app: Express): Promise<Listening> {
  const server = http.createServer(app);
  server.headersTimeout = 10_000;
  server.requestTimeout = 60_000;
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
