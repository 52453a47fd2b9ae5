// Workspaces and their API keys. Keys are shown once and stored only as SHA-256 digests.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Db } from '../db/pool.js';
import { addCreditsIn, NotFoundError } from '../billing/ledger.js';
import { inTransaction, prepared } from '../db/pool.js';

export interface Workspace {
  id: string;
  name: string;
  balance_micro_eur: number;
  /** What Stripe refunds and disputes took beyond the balance (../payments/): paid first by the next credits. */
  owed_micro_eur: number;
  /** null = the service's default (MAX_PENDING_JOBS_PER_WORKSPACE). */
  max_pending_jobs: number | null;
}

export interface ApiKeyPrincipal {
  key_id: string;
  workspace_id: string;
  /** null = every model. */
  models: string[] | null;
}

const KEY_PREFIX = 'vva_sk_';
/** Bearer keys are short strings; anything longer is rejected before hashing. */
export const API_KEY_LENGTH_MAX = 200;

export const hashApiKey = (key: string) => createHash('sha256').update(key, 'utf8').digest();

export async function createWorkspace(db: Db, input: { name: string; credits_micro_eur?: number }): Promise<Workspace> {
  const id = randomUUID();
  // The workspace and its initial credits together, or neither.
  await inTransaction(db, async (tx) => {
    await tx.query('INSERT INTO workspaces (id, name) VALUES ($1, $2)', [id, input.name]);
    if (input.credits_micro_eur && input.credits_micro_eur > 0) {
      await addCreditsIn(tx, { workspaceId: id, amount_micro_eur: input.credits_micro_eur, idempotencyKey: 'initial-credits' });
    }
  });
  return getWorkspace(db, id);
}

export async function getWorkspace(db: Db, id: string): Promise<Workspace> {
  const r = await db.query<Workspace>(
    'SELECT id, name, balance_micro_eur, owed_micro_eur, max_pending_jobs FROM workspaces WHERE id = $1',
    [id],
  );
  if (!r.rows[0]) throw new NotFoundError(`workspace ${id} not found`);
  return r.rows[0];
}

/** Sets a workspace's own limit of pending jobs (null: the service's default); the charge reads it. */
export async function setWorkspaceLimits(db: Db, id: string, limits: { max_pending_jobs: number | null }): Promise<Workspace> {
  const r = await db.query('UPDATE workspaces SET max_pending_jobs = $2 WHERE id = $1', [id, limits.max_pending_jobs]);
  if (r.rowCount === 0) throw new NotFoundError(`workspace ${id} not found`);
  return getWorkspace(db, id);
}

export async function createApiKey(
  db: Db,
  input: { workspaceId: string; models: string[] | null; spend_limit_micro_eur?: number | null },
): Promise<{ id: string; key: string; models: string[] | null; spend_limit_micro_eur: number | null }> {
  await getWorkspace(db, input.workspaceId);
  const id = randomUUID();
  const key = KEY_PREFIX + randomBytes(32).toString('base64url');
  const spend_limit_micro_eur = input.spend_limit_micro_eur ?? null;
  await db.query(
    'INSERT INTO api_keys (id, workspace_id, key_sha256, key_prefix, models, spend_limit_micro_eur) VALUES ($1, $2, $3, $4, $5, $6)',
    [id, input.workspaceId, hashApiKey(key), key.slice(0, KEY_PREFIX.length + 4), input.models, spend_limit_micro_eur],
  );
  return { id, key, models: input.models, spend_limit_micro_eur };
}

/**
 * Revokes a key, for good. The process that revokes it refuses it from the next request on; every other
 * API process within API_KEY_CACHE_TTL_MS (authentication keeps a key it found active that long).
 * Idempotent (a revoked key stays revoked).
 */
export async function revokeApiKey(db: Db, id: string): Promise<{ id: string }> {
  const r = await db.query<{ id: string }>('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 RETURNING id', [id]);
  if (!r.rows[0]) throw new NotFoundError(`API key ${id} not found`);
  activeKeys.forget(id);
  return r.rows[0];
}

/** How long authentication trusts a key it found active without looking again: a revocation elsewhere takes this long at most. */
export const API_KEY_CACHE_TTL_MS = 5_000;
/** Keys remembered at once, at most (the oldest forgotten first). */
const API_KEY_CACHE_MAX = 10_000;

/**
 * The keys this process found active lately, by digest: a client polling its jobs costs one key lookup
 * per API_KEY_CACHE_TTL_MS, not one per request. Only keys found active are kept (an unknown digest is
 * looked up every time; the per-address limit of failed authentications bounds that).
 */
class ActiveKeys {
  private readonly byDigest = new Map<string, { principal: ApiKeyPrincipal; until_ms: number }>();

  get(digest: Buffer): ApiKeyPrincipal | null {
    const hex = digest.toString('hex');
    const hit = this.byDigest.get(hex);
    if (!hit) return null;
    if (performance.now() < hit.until_ms) return hit.principal;
    this.byDigest.delete(hex);
    return null;
  }

  set(digest: Buffer, principal: ApiKeyPrincipal): void {
    const hex = digest.toString('hex');
    this.byDigest.delete(hex);
    if (this.byDigest.size >= API_KEY_CACHE_MAX) this.byDigest.delete(this.byDigest.keys().next().value!);
    this.byDigest.set(hex, { principal, until_ms: performance.now() + API_KEY_CACHE_TTL_MS });
  }

  forget(key_id: string): void {
    for (const [hex, { principal }] of this.byDigest) if (principal.key_id === key_id) this.byDigest.delete(hex);
  }
}
const activeKeys = new ActiveKeys();

/** authenticateApiKeyDigest, answered from the keys found active in the last API_KEY_CACHE_TTL_MS when it can be. */
export async function authenticateApiKeyDigestCached(db: Db, digest: Buffer): Promise<ApiKeyPrincipal | null> {
  const known = activeKeys.get(digest);
  if (known) return known;
  const principal = await authenticateApiKeyDigest(db, digest);
  if (principal) activeKeys.set(digest, principal);
  return principal;
}

/**
 * The active key of SHA-256 digest $1, as the principal a request is authenticated as (ApiKeyPrincipal's
 * columns). Every lookup of a key is this query, alone or as the subquery of a read that authenticates
 * in the same round trip (a job's status read).
 */
export const ACTIVE_KEY_SQL = 'SELECT id AS key_id, workspace_id, models FROM api_keys WHERE key_sha256 = $1 AND revoked_at IS NULL';
const PRINCIPAL = prepared('api-key-principal', ACTIVE_KEY_SQL);

/** The digest a bearer key is looked up by; null for what no key can be (empty, or longer than any key). */
export function apiKeyDigest(key: string): Buffer | null {
  return key.length === 0 || key.length > API_KEY_LENGTH_MAX ? null : hashApiKey(key);
}

export async function authenticateApiKey(db: Db, key: string): Promise<ApiKeyPrincipal | null> {
  const digest = apiKeyDigest(key);
  return digest ? authenticateApiKeyDigest(db, digest) : null;
}

/** The principal of the active key of this digest (apiKeyDigest), or null. */
export async function authenticateApiKeyDigest(db: Db, digest: Buffer): Promise<ApiKeyPrincipal | null> {
  const r = await db.query<ApiKeyPrincipal>({ ...PRINCIPAL, values: [digest] });
  return r.rows[0] ?? null;
}
