// Batches and files as PostgreSQL records them, and how /v2 presents them (euros, Unix seconds).
import type { Db, Tx } from '../db/pool.js';
import { microEurToEur } from '../money.js';

export interface BatchRecord {
  id: string;
  workspace_id: string;
  endpoint: string | null;
  status: 'validating' | 'in_progress' | 'completed' | 'cancelling' | 'cancelled' | 'expired' | 'failed';
  total: number;
  completed: number;
  failed: number;
  reserved_micro_eur: number;
  released_micro_eur: number;
  cost_micro_eur: number;
  input_file_id: string | null;
  output_file_id: string | null;
  error_file_id: string | null;
  metadata: Record<string, string> | null;
  ending: 'cancelled' | 'expired' | null;
  created_at_ms: number;
  expires_at_ms: number;
  cancelling_at_ms: number | null;
  completed_at_ms: number | null;
}

const ms = (column: string) => `(extract(epoch FROM ${column}) * 1000)::bigint AS ${column}_ms`;
export const BATCH_COLUMNS = `id, workspace_id, endpoint, status, total, completed, failed, reserved_micro_eur, released_micro_eur, cost_micro_eur,
  input_file_id, output_file_id, error_file_id, metadata, ending, ${ms('created_at')}, ${ms('expires_at')}, ${ms('cancelling_at')}, ${ms('completed_at')}`;

export async function readBatch(db: Db | Tx, id: string): Promise<BatchRecord | null> {
  const r = await db.query<BatchRecord>(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = $1`, [id]);
  return r.rows[0] ?? null;
}

/** A workspace's batches, newest first, a page at a time after the batch `after`. */
export async function listBatches(db: Db, workspaceId: string, limit: number, after: string | undefined): Promise<BatchRecord[]> {
  const r = await db.query<BatchRecord>(
    `SELECT ${BATCH_COLUMNS} FROM batches WHERE workspace_id = $1
        AND ($3::uuid IS NULL OR (created_at, id) < (SELECT created_at, id FROM batches WHERE id = $3::uuid AND workspace_id = $1))
      ORDER BY created_at DESC, id DESC LIMIT $2`,
    [workspaceId, limit, after ?? null],
  );
  return r.rows;
}

const seconds = (v: number | null) => (v === null ? null : Math.floor(v / 1000));

/** The completion window as asked for ("24h"), from the batch's times. */
export const completionWindowOf = (b: BatchRecord) => `${Math.round((b.expires_at_ms - b.created_at_ms) / 3_600_000)}h`;

/** A batch as GET /v2/batches/{id} answers it (and batch.completed carries it). */
export function presentBatch(b: BatchRecord) {
  return {
    id: b.id,
    object: 'batch' as const,
    endpoint: b.endpoint,
    status: b.status,
    request_counts: { total: b.total, completed: b.completed, failed: b.failed },
    reserved_in_euro: microEurToEur(b.reserved_micro_eur),
    cost_in_euro: microEurToEur(b.cost_micro_eur),
    refunded_in_euro: microEurToEur(b.released_micro_eur),
    input_file_id: b.input_file_id,
    output_file_id: b.output_file_id,
    error_file_id: b.error_file_id,
    completion_window: completionWindowOf(b),
    created_at: seconds(b.created_at_ms)!,
    expires_at: seconds(b.expires_at_ms)!,
    cancelling_at: seconds(b.cancelling_at_ms),
    completed_at: seconds(b.completed_at_ms),
    metadata: b.metadata,
  };
}

export interface FileRecord {
  id: string;
  workspace_id: string;
  purpose: 'batch' | 'batch_output' | 'batch_error';
  filename: string;
  bytes: number;
  lines: number;
  storage_key: string | null;
  batch_id: string | null;
  created_at_ms: number;
}

export async function readFile(db: Db | Tx, id: string): Promise<FileRecord | null> {
  const r = await db.query<FileRecord>(
    `SELECT id, workspace_id, purpose, filename, bytes, lines, storage_key, batch_id, ${ms('created_at')} FROM files WHERE id = $1`,
    [id],
  );
  return r.rows[0] ?? null;
}

export function presentFile(f: FileRecord, bytes: number = f.bytes) {
  return {
    id: f.id,
    object: 'file' as const,
    purpose: f.purpose,
    filename: f.filename,
    bytes,
    created_at: Math.floor(f.created_at_ms / 1000),
  };
}
