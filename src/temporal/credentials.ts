// Rotating Temporal credentials without a restart: Temporal's client configuration is read again on
// SIGHUP and whenever one of the files it came from changes (the TOML profile file, which may hold
// the API key, and the certificate, key and CA files; checked every TEMPORAL_CREDENTIALS_CHECK_INTERVAL_MS
// by their modification time and inode, which also sees a Kubernetes secret's symlink swap). A new
// API key is applied to the open connections; a new certificate, key, CA or server name needs a new
// connection, which the owner opens and swaps in. New credentials are first tried on a connection of
// their own (the namespace described with them): a configuration that cannot be read, or credentials
// Temporal refuses, are logged and the current ones kept, so a mistyped key never replaces a working one.
// A failed attempt is tried again, with backoff, at the interval's ticks for as long as the configuration
// on disk differs from the one in use: a Temporal that was unreachable or slow at the moment of a rotation
// (or that trusts the new certificate only later) gets the new credentials once it accepts them, well
// before the old ones expire. The log names the kind of failure (refused, unreachable, timeout, ...).
import fs from 'node:fs';
import type { Logger } from 'pino';
import { loadTemporalSettings, type TemporalConnectOptions, type TemporalSettings } from './connection-config.js';
import { verifyCredentials } from './client.js';
import { temporalFailureKind } from './startup-errors.js';

/** A connection a certificate rotation replaced is closed this long after, once the calls begun on it have ended. */
export const RETIRED_CONNECTION_GRACE_MS = 60_000;
/** The longest wait between two attempts at credentials that failed (the first waits one check interval). */
export const CREDENTIALS_RETRY_MAX_MS = 5 * 60_000;

/**
 * The connections certificate rotations replaced: each is closed `grace_ms` after it was replaced (the
 * calls and polls begun on it end first, as the workers' long polls do within a minute), all of them at
 * once when the process closes.
 */
export class RetiredConnections {
  private readonly retired = new Set<{ close(): Promise<unknown> }>();

  constructor(private readonly grace_ms = RETIRED_CONNECTION_GRACE_MS) {}

  retire(connection: { close(): Promise<unknown> }): void {
    this.retired.add(connection);
    setTimeout(() => {
      if (this.retired.delete(connection)) void connection.close().catch(() => {});
    }, this.grace_ms).unref();
  }

  /** How many wait to be closed. */
  get size(): number {
    return this.retired.size;
  }

  async closeAll(): Promise<void> {
    const all = [...this.retired];
    this.retired.clear();
    for (const c of all) await c.close().catch(() => {});
  }
}

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
  /** Set while the configuration on disk differs from the one in use and applying it failed: when to try again. */
  private retry: { failures: number; at: number } | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  /** Checks queued or running. */
  private checking = 0;

  constructor(
    private readonly opts: {
      env: Record<string, string>;
      settings: TemporalSettings;
      intervalMs: number;
      logger: Logger;
      /** Applies a change; a throw keeps the current credentials (logged). */
      apply: (change: CredentialChange) => Promise<void>;
      /** Checks that Temporal accepts credentials (default: a connection of their own, the namespace described). */
      verify?: (connect: TemporalConnectOptions, namespace: string) => Promise<void>;
    },
  ) {
    this.current = opts.settings;
  }

  start(): void {
    process.on('SIGHUP', this.onSighup);
    this.watch(this.current.files);
    // Each interval: a failed rotation whose backoff has passed is tried again.
    this.retryTimer = setInterval(() => {
      if (this.retry && Date.now() >= this.retry.at && this.checking === 0) void this.check('retry');
    }, this.opts.intervalMs);
    this.retryTimer.unref();
  }

  stop(): void {
    this.stopped = true;
    process.off('SIGHUP', this.onSighup);
    this.watch([]);
    if (this.retryTimer) clearInterval(this.retryTimer);
  }

  /** Whether a rotation that failed waits to be tried again (the configuration on disk is not the one in use). */
  get retrying(): boolean {
    return this.retry !== null;
  }

  /** Records a failed attempt; answers the wait before the next (one interval, doubling, capped). */
  private failed(): number {
    const failures = (this.retry?.failures ?? 0) + 1;
    const wait_ms = Math.min(this.opts.intervalMs * 2 ** (failures - 1), Math.max(CREDENTIALS_RETRY_MAX_MS, this.opts.intervalMs));
    this.retry = { failures, at: Date.now() + wait_ms };
    return wait_ms;
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
    this.checking++;
    this.chain = this.chain.then(() => this.checkNow(reason)).finally(() => this.checking--);
    return this.chain;
  }

  private async checkNow(reason: string): Promise<void> {
    if (this.stopped) return;
    let next: TemporalSettings;
    try {
      next = loadTemporalSettings(this.opts.env);
    } catch (err) {
      const retry_in_ms = this.failed();
      this.opts.logger.error(
        { reason, kind: 'unreadable_configuration', retry_in_ms, error: (err as Error).message },
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
    if (!change.apiKey && !change.tls) {
      // What is on disk is what is in use (a failed rotation was undone there): nothing to try again.
      this.retry = null;
      return;
    }
    const verify = this.opts.verify ?? verifyCredentials;
    try {
      await verify({ ...next.connect, address: this.current.connect.address }, this.current.namespace);
    } catch (err) {
      const kind = temporalFailureKind(err);
      const retry_in_ms = this.failed();
      const attempts = this.retry!.failures;
      this.opts.logger.error(
        { reason, kind, attempts, retry_in_ms, error: (err as Error).message },
        kind === 'refused'
          ? 'Temporal credentials not rotated: Temporal refuses the new ones; the current ones stay in use (tried again later)'
          : `Temporal credentials not rotated yet: checking the new ones failed (${kind}); the current ones stay in use, tried again later`,
      );
      return;
    }
    try {
      await this.opts.apply(change);
    } catch (err) {
      const kind = temporalFailureKind(err);
      const retry_in_ms = this.failed();
      this.opts.logger.error(
        { reason, kind, attempts: this.retry!.failures, retry_in_ms, error: (err as Error).message },
        `Temporal credentials not rotated: a connection with the new ones failed (${kind}); the current ones stay in use, tried again later`,
      );
      return;
    }
    this.current = next;
    this.retry = null;
    this.watch(next.files);
    this.opts.logger.info({ reason, api_key_changed: change.apiKey, tls_changed: change.tls }, 'Temporal credentials rotated');
  }
}
