// The chaos loop: at random, SIGKILL one piece of the service (an API process, a worker process,
// PostgreSQL or Temporal; the kinds in rounds of a random order, the process of a kind at random), leave it down for a few seconds to ~20 s, start it again, wait a few seconds
// of calm, repeat. One piece down at a time; bounded by its deadline and a count.
import type { Target } from './cluster.js';
import type { Fault } from './report.js';
import type { Rng } from './rng.js';
import { sleep } from './client.js';

export interface ChaosOptions {
  /** No new fault starts after this (Date.now() ms). */
  until_ms: number;
  down_ms: { min: number; max: number };
  calm_ms: { min: number; max: number };
  /** Hard bound on the number of faults. */
  max_faults: number;
  log: (line: string) => void;
  /** Wait between restart attempts (default 2 s). */
  retry_wait_ms?: number;
}

export interface Chaos {
  faults: Fault[];
  /** Problems of the loop itself (a restart that failed three times). */
  problems: string[];
  /** Resolves when the loop has ended (its deadline, or stop()). */
  done: Promise<void>;
  stop(): void;
}

const RESTART_TRIES = 3;

function shuffled<T>(items: readonly T[], rng: Rng): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

export function startChaos(targets: readonly Target[], rng: Rng, opts: ChaosOptions): Chaos {
  const faults: Fault[] = [];
  const problems: string[] = [];
  let stopped = false;
  // Each kind of target is equally likely, whatever the number of API or worker processes.
  const kinds = [...new Set(targets.map((t) => t.name.replace(/-\d+$/, '')))];

  let round: string[] = [];

  async function loop(): Promise<void> {
    while (!stopped && faults.length < opts.max_faults) {
      await sleep(rng.int(opts.calm_ms.min, opts.calm_ms.max));
      if (stopped || Date.now() >= opts.until_ms) return;
      // Kinds in rounds, each round in a random order: every kind is hit within any 2 x kinds faults.
      if (round.length === 0) round = shuffled(kinds, rng);
      const kind = round.shift()!;
      const target = rng.pick(targets.filter((t) => t.name.replace(/-\d+$/, '') === kind));
      const down_ms = rng.int(opts.down_ms.min, opts.down_ms.max);
      opts.log(`chaos: SIGKILL ${target.name}, down for ${(down_ms / 1000).toFixed(1)} s`);
      const killed_at = Date.now();
      await target.kill();
      await sleep(down_ms);
      const restart_at = Date.now();
      let restarted = false;
      for (let attempt = 1; attempt <= RESTART_TRIES && !restarted; attempt++) {
        try {
          await target.restart();
          restarted = true;
        } catch (err) {
          opts.log(`chaos: restart of ${target.name} failed (attempt ${attempt}): ${(err as Error).message.slice(0, 300)}`);
          await sleep(opts.retry_wait_ms ?? 2_000);
        }
      }
      const restart_ms = Date.now() - restart_at;
      faults.push({ target: kind, down_ms: Date.now() - killed_at, restart_ms });
      if (!restarted) {
        problems.push(`${target.name} could not be restarted after ${RESTART_TRIES} tries`);
        return; // the end of the soak tries once more; no further faults on a broken service
      }
      opts.log(`chaos: ${target.name} back after ${((Date.now() - killed_at) / 1000).toFixed(1)} s (restart ${restart_ms} ms)`);
    }
  }

  const done = loop().catch((err: Error) => {
    problems.push(`chaos loop failed: ${err.message}`);
  });
  return {
    faults,
    problems,
    done,
    stop() {
      stopped = true;
    },
  };
}
