// The simulated providers' usage counters (table simulator.provider_calls), as a real provider's usage
// page shows them: every call received, whatever its outcome. Tests count provider calls with them.
import type { Db } from '../db/pool.js';

/** Counts one call of `operation` ($1). */
export const COUNT_PROVIDER_CALL_SQL =
  'INSERT INTO simulator.provider_calls (operation, calls) VALUES ($1, 1) ON CONFLICT (operation) DO UPDATE SET calls = simulator.provider_calls.calls + 1';

/** How many calls of `operation` the simulated providers received on this database. */
export async function providerCalls(db: Db, operation: 'speech' | 'video_submit' | 'video_poll' | 'video_cancel'): Promise<number> {
  const r = await db.query<{ calls: number }>('SELECT calls FROM simulator.provider_calls WHERE operation = $1', [operation]);
  return r.rows[0]?.calls ?? 0;
}
