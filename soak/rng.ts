// The soak's randomness: one seeded generator (pure-rand's xoroshiro128+), so a run's choices of
// actions, outcomes and faults can be replayed with the same SOAK_SEED (timing still varies).
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';

export class Rng {
  private readonly gen: RandomGenerator;

  constructor(seed: number) {
    this.gen = xoroshiro128plus(seed);
  }

  /** An integer in [from, to], both included. */
  int(from: number, to: number): number {
    return uniformInt(this.gen, from, to);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return uniformFloat64(this.gen) < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from nothing');
    return items[this.int(0, items.length - 1)]!;
  }

  /** One of the keys of `weights`, each with a probability proportional to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((s, [, w]) => s + w, 0);
    let x = uniformFloat64(this.gen) * total;
    for (const [k, w] of entries) {
      if (x < w) return k;
      x -= w;
    }
    return entries[entries.length - 1]![0];
  }
}
