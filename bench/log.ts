// Progress lines on stderr, with the time since the run started; the figures go to stdout.
export type Log = (message: string) => void;

export function progressLog(started_ms = Date.now()): Log {
  return (message) => process.stderr.write(`[${((Date.now() - started_ms) / 1000).toFixed(0).padStart(4)} s] ${message}\n`);
}
