// Rotating Temporal credentials without a restart: Temporal's client configuration is read again on
// SIGHUP and whenever one of the files it came from changes (the TOML profile file, which may hold
// the API key, and the certificate, key and CA files; checked every TEMPORAL_CREDENTIALS_CHECK_INTERVAL_MS
// by their modification time and inode, which also sees a Kubernetes secret's symlink swap). A new
// API key is applied to the open connections; a new certificate, key, CA or server name needs a new
// connection, which the owner opens and swaps in. New credentials are first tried on a connection of
// their own (the namespace described with them): a configuration that cannot be read, or credentials
// Temporal refuses, are logged and the current ones kept, so a mistyped key never replaces a working one.
import fs from 'node:fs';
import type { Logger } from 'pino';
import { loadTemporalSettings, type TemporalSettings } from './connection-config.js';
import { verifyCredentials } from './client.js';

export interface CredentialChange {
  next: TemporalSettings;
  apiKey: boolean;
  /** Certificate, key, CA or server name: a new connection is needed. */
  tls: boolean;
}

export class CredentialWatcher {
  private current: TemporalSettings;
  private watched: string[] = [];
  private chain: Promise<void> = Promise.resolve();
  private readonly onSighup = () => void this.check('SIGHUP');
  private stopped = false;

  constructor(
    private readonly opts: {
      env: Record<string, string>;
      settings: TemporalSettings;
      intervalMs: number;
      logger: Logger;
      /** Applies a change; a throw keeps the current credentials (logged). */
      apply: (change: CredentialChange) => Promise<void>;
    },
  ) {
    this.current = opts.settings;
  }

  start(): void {
    process.on('SIGHUP', this.onSighup);
    this.watch(this.current.files);
  }

  stop(): void {
    this.stopped = true;
    process.off('SIGHUP', this.onSighup);
    this.watch([]);
  }

  private readonly onFileChange = (curr: fs.Stats, prev: fs.Stats) => {
    if (curr.mtimeMs !== prev.mtimeMs || curr.ino !== prev.ino || curr.size !== prev.size) void this.check('file changed');
  };

  private watch(files: string[]): void {
    for (const f of this.watched) fs.unwatchFile(f, this.onFileChange);
    this.watched = [...new Set(files)];
    for (const f of this.watched) fs.watchFile(f, { interval: this.opts.intervalMs, persistent: false }, this.onFileChange);
  }

  /** Reads the configuration again and applies what changed; one check at a time. Resolves when done. */
  check(reason: string): Promise<void> {
    this.chain = this.chain.then(() => this.checkNow(reason));
    return this.chain;
  }

  private async checkNow(reason: string): Promise<void> {
    if (this.stopped) return;
    let next: TemporalSettings;
    try {
      next = loadTemporalSettings(this.opts.env);
    } catch (err) {
      this.opts.logger.error(
        { reason, error: (err as Error).message },
        'Temporal credentials not reloaded: the configuration cannot be read; the current credentials stay in use',
      );
      return;
    }
    const change: CredentialChange = {
      next,
      apiKey: next.connect.apiKey !== this.current.connect.apiKey,
      tls:
        next.tlsDigest !== this.current.tlsDigest ||
        JSON.stringify(next.connect.metadata ?? {}) !== JSON.stringify(this.current.connect.metadata ?? {}),
    };
    if (next.address !== this.current.address || next.namespace !== this.current.namespace) {
      this.opts.logger.warn({ reason }, 'Temporal address or namespace changed in the configuration: applied only by a restart');
    }
    if (!change.apiKey && !change.tls) return;
    try {
      await verifyCredentials({ ...next.connect, address: this.current.connect.address }, this.current.namespace);
    } catch (err) {
      this.opts.logger.error(
        { reason, error: (err as Error).message },
        'Temporal credentials not rotated: Temporal refuses the new ones; the current ones stay in use',
      );
      return;
    }
    try {
      await this.opts.apply(change);
    } catch (err) {
      this.opts.logger.error(
        { reason, error: (err as Error).message },
        'Temporal credentials not rotated: a connection with the new ones failed; the current ones stay in use',
      );
      return;
    }
    this.current = next;
    this.watch(next.files);
    this.opts.logger.info({ reason, api_key_changed: change.apiKey, tls_changed: change.tls }, 'Temporal credentials rotated');
  }
}
