// The simulated providers' usage counters (table simulator.provider_calls), as a real provider's usage
// page shows them: every call received, whatever its outcome. Tests count provider calls with them.
import { prepared, type Db } from '../db/pool.js';

/** Rows each operation's count is spread over, so concurrent calls do not queue on one row's lock (at most 64). */
export const PROVIDER_CALL_SHARDS = 16;

/**
 * Counts calls of the operation in parameter `param` (such as "$1"), on a shard picked by the database:
 * one call, or as many as parameter `calls` holds.
 */
export const countProviderCallSql = (param: `$${number}`, calls: `$${number}` | 1 = 1): string =>
  `INSERT INTO simulator.provider_calls (operation, shard, calls) VALUES (${param},
    floor(random() * ${PROVIDER_CALL_SHARDS})::smallint, ${calls === 1 ? '1' : `${calls}::bigint`})
   ON CONFLICT (operation, shard) DO UPDATE SET calls = simulator.provider_calls.calls + EXCLUDED.calls`;

/** Counts one call of `operation` ($1). */
export const COUNT_PROVIDER_CALL = prepared('simulator-count-call', countProviderCallSql('$1'));

/** How many calls of `operation` the simulated providers received on this database. */
export async function providerCalls(db: Db, operation: 'speech' | 'video_submit' | 'video_poll' | 'video_cancel'): Promise<number> {
  const r = await db.query<{ calls: number }>(
    'SELECT COALESCE(SUM(calls), 0)::bigint AS calls FROM simulator.provider_calls WHERE operation = $1',
    [operation],
  );
  return Number(r.rows[0]?.calls ?? 0);
}
