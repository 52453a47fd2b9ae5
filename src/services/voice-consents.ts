// Voice consents: the recording in which a voice's owner agrees to its cloning, uploaded before the
// clone and named by it. A consent belongs to one workspace: from any other it does not exist (the same
// 404 as an id that never existed). With VOICE_CONSENT_REQUIRED (the default in production) a clone
// must name one; a voice cloned without one is marked requires_verification.
import { randomBytes } from 'node:crypto';
import type { Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import { ApiError, notFound } from '../errors.js';
import type { ApiKeyPrincipal } from './workspaces.js';

/** Consents a workspace may hold at once. */
export const MAX_CONSENTS_PER_WORKSPACE = 500;

export interface VoiceConsentRecord {
  id: string;
  name: string;
  language: string;
  created_at_ms: number;
}

const SELECT = `SELECT id, name, language, (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms FROM voice_consents`;
const ID_PATTERN = /^cons_[0-9a-f]{24}$/;

const consentNotFound = (id: string, param = 'consent_id') => notFound('consent_not_found', `no voice consent ${id}`, param);

export const consentRequired = () =>
  new ApiError(400, 'invalid_request_error', 'consent_required', 'cloning a voice requires a consent: upload the recording (POST /v1/audio/voice_consents) and name its id in the "consent" part', 'consent');

export class VoiceConsentsService {
  constructor(private readonly deps: { db: Db; storage: Storage; required: boolean }) {}

  /** Whether a clone must name a consent (VOICE_CONSENT_REQUIRED). */
  get required(): boolean {
    return this.deps.required;
  }

  async create(principal: ApiKeyPrincipal, input: { name: string; language: string; recording: Buffer; extension: string }): Promise<VoiceConsentRecord> {
    const live = await this.deps.db.query<{ n: number }>('SELECT count(*)::int AS n FROM voice_consents WHERE workspace_id = $1 AND deleted_at IS NULL', [principal.workspace_id]);
    if (live.rows[0]!.n >= MAX_CONSENTS_PER_WORKSPACE) {
      throw new ApiError(400, 'invalid_request_error', 'consent_limit_reached', `this workspace already has ${MAX_CONSENTS_PER_WORKSPACE} voice consents; delete one first`);
    }
    const id = `cons_${randomBytes(12).toString('hex')}`;
    const key = `consents/${id}.${input.extension}`;
    await this.deps.storage.put(key, input.recording);
    const r = await this.deps.db.query<VoiceConsentRecord>(
      `INSERT INTO voice_consents (id, workspace_id, name, language, recording_storage_key, recording_bytes) VALUES ($1, $2, $3, $4, $5, $6)
       RETURNING id, name, language, (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms`,
      [id, principal.workspace_id, input.name, input.language, key, input.recording.length],
    );
    return r.rows[0]!;
  }

  async get(principal: ApiKeyPrincipal, id: string, param?: string): Promise<VoiceConsentRecord> {
    const r = ID_PATTERN.test(id)
      ? await this.deps.db.query<VoiceConsentRecord>(`${SELECT} WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL`, [id, principal.workspace_id])
      : null;
    const c = r?.rows[0];
    if (!c) throw consentNotFound(id, param);
    return c;
  }

  /** A page, newest first; `after` is the id of the last consent of the previous page. */
  async list(principal: ApiKeyPrincipal, q: { limit: number; after?: string | undefined }): Promise<{ data: VoiceConsentRecord[]; has_more: boolean }> {
    const args: unknown[] = [principal.workspace_id];
    let cursor = '';
    if (q.after !== undefined) {
      const at = ID_PATTERN.test(q.after)
        ? await this.deps.db.query<{ created_at: Date }>('SELECT created_at FROM voice_consents WHERE id = $1 AND workspace_id = $2', [q.after, principal.workspace_id])
        : null;
      if (!at?.rows[0]) throw consentNotFound(q.after, 'after');
      args.push(at.rows[0].created_at, q.after);
      cursor = 'AND (created_at, id) < ($2, $3)';
    }
    args.push(q.limit + 1);
    const r = await this.deps.db.query<VoiceConsentRecord>(
      `${SELECT} WHERE workspace_id = $1 AND deleted_at IS NULL ${cursor} ORDER BY created_at DESC, id DESC LIMIT $${args.length}`,
      args,
    );
    return { data: r.rows.slice(0, q.limit), has_more: r.rows.length > q.limit };
  }

  async rename(principal: ApiKeyPrincipal, id: string, name: string): Promise<VoiceConsentRecord> {
    await this.get(principal, id);
    await this.deps.db.query('UPDATE voice_consents SET name = $3 WHERE id = $1 AND workspace_id = $2', [id, principal.workspace_id, name]);
    return this.get(principal, id);
  }

  /** Marks the consent deleted: no new clone may name it; voices cloned with it keep it. */
  async delete(principal: ApiKeyPrincipal, id: string): Promise<void> {
    const r = ID_PATTERN.test(id)
      ? await this.deps.db.query('UPDATE voice_consents SET deleted_at = now() WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL', [id, principal.workspace_id])
      : null;
    if (r?.rowCount !== 1) throw consentNotFound(id);
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
    const r = await this.deps.db.query<{ id: string }>('SELECT id FROM voices WHERE workspace_id = $1 AND voice_id = $2 AND deleted_at IS NULL', [principal.workspace_id, voice_id]);
    return r.rows[0]?.id ?? null;
  }
}
