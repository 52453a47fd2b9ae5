// A TCP proxy to a server of the test run (PostgreSQL, Temporal) that a test can make fail: `silent`
// (a black-holed network: connections stay open, nothing is forwarded either way) or `refusing` (every
// connection is cut and new ones are closed at once, as if the server were gone).
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export class TcpProxy {
  /** Forward nothing, keep connections open. */
  silent = false;
  private refusing = false;
  private server = net.createServer((client) => this.connect(client));
  private sockets = new Set<net.Socket>();
  constructor(private target: { host: string; port: number }) {}

  private connect(client: net.Socket) {
    if (this.refusing) return void client.destroy();
    const upstream = net.connect(this.target.port, this.target.host);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(from);
      from.on('data', (chunk) => {
        if (!this.silent) to.write(chunk);
      });
      from.on('error', () => to.destroy());
      from.on('close', () => {
        this.sockets.delete(from);
        to.destroy();
      });
    }
  }

  /** Listens on a loopback port; the port. */
  async start(): Promise<number> {
    this.server.listen(0, '127.0.0.1');
    await new Promise((r) => this.server.once('listening', r));
    return (this.server.address() as AddressInfo).port;
  }

  /** Cuts every connection and closes new ones at once, until `restore`. */
  refuse(): void {
    this.refusing = true;
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.refusing = false;
    this.silent = false;
  }

  async stop(): Promise<void> {
    this.refuse();
    await new Promise((r) => this.server.close(r));
  }
}
