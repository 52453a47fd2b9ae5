// Signed download URLs: HMAC-SHA256 over the storage key and expiry. Signed when the API answers,
// never inside workflow code. A tampered or expired URL is refused.
import { createHmac, timingSafeEqual } from 'node:crypto';

export class UrlSigner {
  constructor(
    private readonly secret: string,
    private readonly ttl_s: number,
  ) {
    if (secret.length < 32) throw new Error('URL signing secret too short');
  }

  private mac(key: string, expires_at: number): string {
    return createHmac('sha256', this.secret).update(`${key}\n${expires_at}`).digest('base64url');
  }

  /** Path and query of a signed URL for `key`, valid until now + ttl. */
  sign(key: string, now_s: number = Math.floor(Date.now() / 1000)): { path: string; expires_at: number } {
    const expires_at = now_s + this.ttl_s;
    return { path: `/v2/files/${key}?expires=${expires_at}&signature=${this.mac(key, expires_at)}`, expires_at };
  }

  verify(key: string, expires: string | undefined, signature: string | undefined, now_s: number = Math.floor(Date.now() / 1000)): 'ok' | 'expired' | 'invalid' {
    if (!expires || !signature || !/^\d{1,12}$/.test(expires) || signature.length > 100) return 'invalid';
    const expected = Buffer.from(this.mac(key, Number(expires)));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return 'invalid';
    return Number(expires) < now_s ? 'expired' : 'ok';
  }
}
