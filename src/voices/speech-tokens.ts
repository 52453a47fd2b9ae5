// Short-lived tokens for the speech WebSocket (GET /v2/audio/speech/stream?token=...), for browsers,
// which cannot set an Authorization header on a WebSocket: POST /v2/audio/speech/tokens, authenticated
// by an API key, answers one. A token names that key and its workspace and when it expires, signed with
// HMAC-SHA-256 under a key derived from URL_SIGNING_SECRET; nothing is stored. It is good for opening
// sockets until it expires (SPEECH_TOKEN_TTL_S) and never beyond its key: a revoked key's tokens are
// refused at once (the key is looked up at each upgrade).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { Db } from '../db/pool.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';

const TOKEN_PREFIX = 'vva_st_';
/** The longest token string looked at (a real one is about 150 characters). */
export const SPEECH_TOKEN_CHARS_MAX = 400;

const Claims = z.strictObject({ k: z.uuid(), w: z.uuid(), e: z.int().positive() });

export class SpeechTokens {
  readonly #key: Buffer;

  constructor(
    urlSigningSecret: string,
    readonly ttl_s: number,
  ) {
    // A key of its own: a token is never a valid download signature, nor the reverse.
    this.#key = createHmac('sha256', urlSigningSecret).update('speech-socket-token').digest();
  }

  /** A token for `principal`'s key, valid ttl_s from `now_ms`. */
  issue(principal: ApiKeyPrincipal, now_ms = Date.now()): { token: string; expires_at_s: number } {
    const expires_at_s = Math.floor(now_ms / 1000) + this.ttl_s;
    const payload = Buffer.from(JSON.stringify({ k: principal.key_id, w: principal.workspace_id, e: expires_at_s })).toString('base64url');
    return { token: `${TOKEN_PREFIX}${payload}.${this.sign(payload)}`, expires_at_s };
  }

  /** The key and workspace a token names, or why it is refused. */
  verify(token: string, now_ms = Date.now()): { key_id: string; workspace_id: string } | { refused: 'invalid' | 'expired' } {
    if (token.length > SPEECH_TOKEN_CHARS_MAX || !token.startsWith(TOKEN_PREFIX)) return { refused: 'invalid' };
    const [payload, signature, ...rest] = token.slice(TOKEN_PREFIX.length).split('.');
    if (!payload || !signature || rest.length > 0) return { refused: 'invalid' };
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return { refused: 'invalid' };
    let claims: z.output<typeof Claims>;
    try {
      claims = Claims.parse(JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')));
    } catch {
      return { refused: 'invalid' };
    }
    if (claims.e * 1000 <= now_ms) return { refused: 'expired' };
    return { key_id: claims.k, workspace_id: claims.w };
  }

  private sign(payload: string): string {
    return createHmac('sha256', this.#key).update(payload).digest('base64url');
  }
}

/** The principal of an active key of `workspace_id` (null: revoked, or not that workspace's). */
export async function activeKeyPrincipal(db: Db, key_id: string, workspace_id: string): Promise<ApiKeyPrincipal | null> {
  const r = await db.query<ApiKeyPrincipal>(
    'SELECT id AS key_id, workspace_id, models FROM api_keys WHERE id = $1 AND workspace_id = $2 AND revoked_at IS NULL',
    [key_id, workspace_id],
  );
  return r.rows[0] ?? null;
}
