// Shared by every entry point: one-line fatal errors, graceful shutdown on SIGTERM/SIGINT.
import { ConfigError } from './config.js';

/** Runs `main`; a ConfigError (or any startup failure) ends the process with one clear line. */
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
      const message = err instanceof ConfigError ? err.message : `failed to start: ${(err as Error)?.message ?? String(err)}`;
      process.stderr.write(`${name}: ${message}\n`);
      process.exit(1);
    },
  );
}
