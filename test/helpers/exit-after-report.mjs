// Loaded into every test file's process (`--import`, from test/helpers/test-runner-args.ts). With
// --test-force-exit, Node's runner calls process.exit() as soon as a file's last test ends, while the
// verdicts it wrote to stdout (a pipe to the parent runner) may still sit in the reporter's stream or in
// the pipe's write queue when the parent reads slowly: they are then lost, and a file whose test failed
// shows up only as "test failed" with no test named (nodejs/node#64833). Here the exit waits, once, until
// stdout has taken everything written before it, with a bound so an exit never hangs on a parent that
// stopped reading. Plain JavaScript: worker threads (Temporal's workflow threads) load it too, before any
// TypeScript loader is in place on every Node line; only a test file's main thread is changed.
import { isMainThread } from 'node:worker_threads';

const FLUSH_WAIT_MAX_MS = 5_000;

if (isMainThread && process.env.NODE_TEST_CONTEXT) {
  const exitNow = process.exit.bind(process);
  let exiting = false;
  process.exit = (code) => {
    if (code !== undefined && code !== null) process.exitCode = code;
    if (exiting) return undefined;
    exiting = true;
    setTimeout(() => exitNow(), FLUSH_WAIT_MAX_MS).unref();
    // A turn of the event loop lets the reporter's stream pass on what it holds; an empty write's
    // callback runs once everything queued on stdout before it has been handed to the pipe. A few
    // rounds, since each stage of the reporter's pipeline passes its data on in a turn of its own.
    const flush = (rounds) => setImmediate(() => process.stdout.write('', () => (rounds > 1 ? flush(rounds - 1) : exitNow())));
    flush(3);
    return undefined;
  };
}
