// Voice consents: the recording in which a voice's owner agrees to its cloning, uploaded before the
// clone and named by it. A consent belongs to one workspace: from any other it does not exist (the same
// 404 as an id that never existed). With VOICE_CONSENT_REQUIRED (the default in production) a clone
// must name one; a voice cloned without one is marked requires_verification.
//
// Recordings are bounded per workspace: at most CONSENTS_PER_WORKSPACE_MAX live consents and
// CONSENT_RECORDING_BYTES_PER_WORKSPACE bytes of recordings kept, checked and claimed under the
// workspace's consent lock before the recording is stored (a row the upload fills in), so racing
// uploads cannot pass either bound. Deleting a consent removes its recording from storage (the consent's
// row stays, as the record a voice names); what a crash leaves behind is removed by the retention sweep
// (sweepConsentRecordings).
import { randomBytes } from 'node:crypto';
import { inTransaction, type Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import { ApiError, notFound } from '../errors.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';

/** Consents a workspace may hold at once. */
export const CONSENTS_PER_WORKSPACE_MAX = 500;
/** Bytes of consent recordings a workspace may have kept at once (a deleted consent's count until removed). */
export const CONSENT_RECORDING_BYTES_PER_WORKSPACE = 100 * 1024 * 1024;
const CONSENT_LOCK_CLASS = 724_301_120;

export interface VoiceConsentRecord {
  id: string;
  name: string;
  language: string;
  created_at_ms: number;
}

const SELECT = `SELECT id, name, language, (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms FROM voice_consents`;
/**
 * A consent that exists for its workspace: not deleted, and not an upload still in progress (claimed,
 * its recording not yet stored). A row without a claim is a finished upload, whichever release wrote it.
 */
const LIVE = 'deleted_at IS NULL AND (recording_stored_at IS NOT NULL OR recording_claimed_at IS NULL)';
const ID_PATTERN = /^cons_[0-9a-f]{24}$/;

const consentNotFound = (id: string, param = 'consent_id') => notFound('consent_not_found', `no voice consent ${id}`, param);

export const consentRequired = () =>
  new ApiError(
    400,
    'invalid_request_error',
    'consent_required',
    'cloning a voice requires a consent: upload the recording (POST /v1/audio/voice_consents) and name its id in the "consent" part',
    'consent',
  );

export class VoiceConsentsService {
  private readonly limits: { count: number; bytes: number };

  constructor(private readonly deps: { db: Db; storage: Storage; required: boolean; limits?: { count: number; bytes: number } }) {
    this.limits = deps.limits ?? { count: CONSENTS_PER_WORKSPACE_MAX, bytes: CONSENT_RECORDING_BYTES_PER_WORKSPACE };
  }

  /** Whether a clone must name a consent (VOICE_CONSENT_REQUIRED). */
  get required(): boolean {
    return this.deps.required;
  }

  async create(
    principal: ApiKeyPrincipal,
    input: { name: string; language: string; recording: Buffer; extension: string },
  ): Promise<VoiceConsentRecord> {
    const id = `cons_${randomBytes(12).toString('hex')}`;
    const key = `consents/${id}.${input.extension}`;
    const bytes = input.recording.length;
    await inTransaction(this.deps.db, async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [CONSENT_LOCK_CLASS, principal.workspace_id]);
      const used = await tx.query<{ live: number; kept_bytes: string }>(
        `SELECT count(*) FILTER (WHERE deleted_at IS NULL)::int AS live,
                COALESCE(sum(recording_bytes) FILTER (WHERE recording_removed_at IS NULL), 0)::bigint AS kept_bytes
           FROM voice_consents WHERE workspace_id = $1`,
        [principal.workspace_id],
      );
      const { live, kept_bytes } = used.rows[0]!;
      if (live >= this.limits.count) {
        throw new ApiError(
          400,
          'invalid_request_error',
          'consent_limit_reached',
          `this workspace already has ${this.limits.count} voice consents; delete one first`,
        );
      }
      if (Number(kept_bytes) + bytes > this.limits.bytes) {
        throw new ApiError(
          400,
          'invalid_request_error',
          'consent_storage_limit_reached',
          `this workspace's consent recordings would exceed ${this.limits.bytes} bytes; delete a consent first`,
          'recording',
        );
      }
      await tx.query(
        `INSERT INTO voice_consents (id, workspace_id, name, language, recording_storage_key, recording_bytes, recording_claimed_at)
         VALUES ($1, $2, $3, $4, $5, $6, now())`,
        [id, principal.workspace_id, input.name, input.language, key, bytes],
      );
    });
    try {
      await this.deps.storage.put(key, input.recording);
    } catch (err) {
      // Not stored: the claim goes (if this fails too, the sweep removes both).
      await this.deps.storage.delete(key).catch(() => {});
      await this.deps.db.query('DELETE FROM voice_consents WHERE id = $1', [id]).catch(() => {});
      throw new ApiError(503, 'api_error', 'storage_unavailable', `the recording could not be stored (${(err as Error).message})`, null, {
        'Retry-After': '5',
      });
    }
    const r = await this.deps.db.query<VoiceConsentRecord>(
      `UPDATE voice_consents SET recording_stored_at = now() WHERE id = $1
       RETURNING id, name, language, (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms`,
      [id],
    );
    // Gone only if the sweep took it for an upload that never finished (it waits far longer than a store takes).
    if (!r.rows[0])
      throw new ApiError(503, 'api_error', 'storage_unavailable', 'the recording took too long to store; retry', null, {
        'Retry-After': '5',
      });
    return r.rows[0];
  }

  async get(principal: ApiKeyPrincipal, id: string, param?: string): Promise<VoiceConsentRecord> {
    const r = ID_PATTERN.test(id)
      ? await this.deps.db.query<VoiceConsentRecord>(`${SELECT} WHERE id = $1 AND workspace_id = $2 AND ${LIVE}`, [
          id,
          principal.workspace_id,
        ])
      : null;
    const c = r?.rows[0];
    if (!c) throw consentNotFound(id, param);
    return c;
  }

  /** A page, newest first; `after` is the id of the last consent of the previous page. */
  async list(
    principal: ApiKeyPrincipal,
    q: { limit: number; after?: string | undefined },
  ): Promise<{ data: VoiceConsentRecord[]; has_more: boolean }> {
    const args: unknown[] = [principal.workspace_id];
    let cursor = '';
    if (q.after !== undefined) {
      const at = ID_PATTERN.test(q.after)
        ? await this.deps.db.query<{ created_at: Date }>('SELECT created_at FROM voice_consents WHERE id = $1 AND workspace_id = $2', [
            q.after,
            principal.workspace_id,
          ])
        : null;
      if (!at?.rows[0]) throw consentNotFound(q.after, 'after');
      args.push(at.rows[0].created_at, q.after);
      cursor = 'AND (created_at, id) < ($2, $3)';
    }
    args.push(q.limit + 1);
    const r = await this.deps.db.query<VoiceConsentRecord>(
      `${SELECT} WHERE workspace_id = $1 AND ${LIVE} ${cursor} ORDER BY created_at DESC, id DESC LIMIT $${args.length}`,
      args,
    );
    return { data: r.rows.slice(0, q.limit), has_more: r.rows.length > q.limit };
  }

  async rename(principal: ApiKeyPrincipal, id: string, name: string): Promise<VoiceConsentRecord> {
    await this.get(principal, id);
    await this.deps.db.query('UPDATE voice_consents SET name = $3 WHERE id = $1 AND workspace_id = $2', [id, principal.workspace_id, name]);
    return this.get(principal, id);
  }

  /** Marks the consent deleted and removes its recording: no new clone may name it; voices cloned with it keep its record. */
  async delete(principal: ApiKeyPrincipal, id: string): Promise<void> {
    const r = ID_PATTERN.test(id)
      ? await this.deps.db.query<{ recording_storage_key: string }>(
          `UPDATE voice_consents SET deleted_at = now() WHERE id = $1 AND workspace_id = $2 AND ${LIVE} RETURNING recording_storage_key`,
          [id, principal.workspace_id],
        )
      : null;
    const deleted = r?.rows[0];
    if (!deleted) throw consentNotFound(id);
    // A failure here leaves the recording to the retention sweep (it counts against the workspace until then).
    await removeRecording(this.deps.db, this.deps.storage, id, deleted.recording_storage_key).catch(() => {});
  }

  /** The consent a clone names (this workspace's, live; a 404 naming `consent` otherwise), or a 400 when one is required and none is named. */
  async forClone(principal: ApiKeyPrincipal, consent: string | undefined): Promise<string | null> {
    if (consent === undefined) {
      if (this.deps.required) throw consentRequired();
      return null;
    }
    return (await this.get(principal, consent, 'consent')).id;
  }

  /** The registry id of this workspace's live cloned voice with provider id `voice_id`, or null. */
  async registryIdOf(principal: ApiKeyPrincipal, voice_id: string): Promise<string | null> {
    const r = await this.deps.db.query<{ id: string }>(
      'SELECT id FROM voices WHERE workspace_id = $1 AND voice_id = $2 AND deleted_at IS NULL',
      [principal.workspace_id, voice_id],
    );
    return r.rows[0]?.id ?? null;
  }
}

async function removeRecording(db: Db, storage: Storage, id: string, key: string): Promise<void> {
  await storage.delete(key);
  await db.query('UPDATE voice_consents SET recording_removed_at = now() WHERE id = $1', [id]);
}

/**
 * Removes up to `limit` recordings nobody may use: those of deleted consents not yet removed, and those
 * of uploads claimed but not finished within `grace_ms` (their rows go too: no voice can name them).
 * A row no upload claimed (an earlier release's finished upload) is never taken for an unfinished one,
 * and a consent a voice names is never deleted. Each row is removed on its own: one that fails is passed
 * to `onFailure` and the sweep goes on. Answers the number removed.
 */
export async function sweepConsentRecordings(
  db: Db,
  storage: Storage,
  grace_ms: number,
  limit: number,
  onFailure: (consentId: string, err: Error) => void = () => {},
): Promise<number> {
  const r = await db.query<{ id: string; recording_storage_key: string; deleted: boolean }>(
    `SELECT id, recording_storage_key, deleted_at IS NOT NULL AS deleted FROM voice_consents c
      WHERE recording_removed_at IS NULL
        AND (deleted_at IS NOT NULL
             OR (recording_stored_at IS NULL AND recording_claimed_at IS NOT NULL
                 AND created_at < now() - make_interval(secs => $1::float8 / 1000)
                 AND NOT EXISTS (SELECT 1 FROM voices v WHERE v.consent_id = c.id)))
      ORDER BY created_at LIMIT $2`,
    [grace_ms, limit],
  );
  let removed = 0;
  for (const c of r.rows) {
    try {
      // A deleted consent's row stays (voices name it): only its recording goes.
      if (c.deleted) await removeRecording(db, storage, c.id, c.recording_storage_key);
      else if (!(await removeUnfinishedUpload(db, storage, c.id, c.recording_storage_key))) continue;
      removed++;
    } catch (err) {
      onFailure(c.id, err instanceof Error ? err : new Error(String(err)));
    }
  }
  return removed;
}

/** Deletes an abandoned upload's claim, then its recording; false when it finished (or a voice names it) meanwhile. */
async function removeUnfinishedUpload(db: Db, storage: Storage, id: string, key: string): Promise<boolean> {
  const gone = await db.query(
    `DELETE FROM voice_consents c WHERE id = $1 AND recording_stored_at IS NULL AND recording_claimed_at IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM voices v WHERE v.consent_id = c.id)`,
    [id],
  );
  if (gone.rowCount !== 1) return false;
  // The row goes first: a failure here leaves an object no row lists, never a row naming a deleted recording.
  await storage.delete(key);
  return true;
}
