// Shared by every entry point: one-line fatal errors, graceful shutdown on SIGTERM/SIGINT.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from './config-error.js';

const ERRNO_TEXT: Record<string, { what: string; fix: string }> = {
  EACCES: { what: 'permission denied', fix: 'run as a user who may write there, or set DATA_DIR to a directory you own' },
  EPERM: { what: 'operation not permitted', fix: 'run as a user who may write there, or set DATA_DIR to a directory you own' },
  EROFS: { what: 'read-only file system', fix: 'set DATA_DIR to a writable directory' },
  ENOSPC: { what: 'no space left on device', fix: 'free some disk space or set DATA_DIR to another disk' },
  ENOTDIR: { what: 'a part of the path is not a directory', fix: 'check DATA_DIR' },
  EEXIST: { what: 'already exists', fix: 'remove it or set DATA_DIR to another directory' },
  ENOENT: { what: 'no such file or directory', fix: 'check DATA_DIR and the paths you set' },
};

/**
 * The one line a startup failure ends with, saying what to do: a ConfigError's own message, a file
 * system error in words, and for anything unforeseen (a bug) where its details were written.
 */
export function startupFailureLine(err: unknown, writeDetails: (text: string) => string | null = writeCrashReport): string {
  if (err instanceof ConfigError) return err.message;
  const e = err as NodeJS.ErrnoException | undefined;
  const known = e && typeof e.code === 'string' ? ERRNO_TEXT[e.code] : undefined;
  if (known && typeof e!.path === 'string') {
    return `cannot ${e!.syscall ?? 'use'} ${e!.path} (${known.what}): ${known.fix}`;
  }
  const file = writeDetails(err instanceof Error ? (err.stack ?? `${err.name}: ${err.message}`) : String(err));
  return `could not start because of an unexpected internal error; please report it${file ? ` with ${file}` : ''}`;
}

/** Writes an unforeseen startup error's details to a file under the temporary directory; its path, or null. */
function writeCrashReport(text: string): string | null {
  try {
    const file = path.join(os.tmpdir(), `video-voice-api-startup-error-${process.pid}.txt`);
    fs.writeFileSync(file, `${new Date().toISOString()}\n${text}\n`);
    return file;
  } catch {
    return null;
  }
}

/** Runs `main`; any startup failure ends the process with one clear line (startupFailureLine). */
export function runMain(name: string, main: () => Promise<() => Promise<void>>): void {
  let stopping = false;
  main().then(
    (shutdown) => {
      const stop = (signal: string) => {
        if (stopping) {
          process.stderr.write(`${name}: second ${signal}, exiting now\n`);
          process.exit(1);
        }
        stopping = true;
        process.stderr.write(`${name}: ${signal} received, shutting down gracefully\n`);
        shutdown().then(
          () => process.exit(0),
          (err) => {
            process.stderr.write(`${name}: error during shutdown: ${(err as Error).message}\n`);
            process.exit(1);
          },
        );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
    },
    (err: unknown) => {
      process.stderr.write(`${name}: ${startupFailureLine(err)}\n`);
      process.exit(1);
    },
  );
}
