// Signed download URLs, made when the API answers, never inside workflow code. The presenter asks a
// DownloadUrlSigner and does not know the storage behind it: with local storage that is UrlSigner
// below (HMAC-SHA256 over key and expiry, served by GET /v2/files); with S3 it is S3Storage
// (presigned GET URLs, served by the bucket). A tampered or expired URL is refused either way.
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface DownloadUrl {
  /** Absolute URL a customer downloads the object from, without credentials. */
  url: string;
  /** Unix seconds after which the URL is refused. */
  expires_at: number;
}

export interface DownloadUrlSigner {
  /**
   * An expiring download URL for a stored object. `baseUrl` is this API's absolute public base
   * (PUBLIC_BASE_URL or the request's own); signers whose URLs point elsewhere ignore it.
   */
  downloadUrl(key: string, baseUrl: string): Promise<DownloadUrl>;
}

/** The step in which URL validity moves: a job's answer (its URLs) stays the same for a step, so its ETag does. */
export const URL_EXPIRY_STEP_S = 3600;

/**
 * The validity of a URL signed at `now_s` for at least `ttl_s`: issued at the start of the current step
 * (of URL_EXPIRY_STEP_S, or `ttl_s` when shorter) and expiring `ttl_s` after its end. Every URL signed
 * within one step is the same; it is valid at least `ttl_s` and at most `ttl_s` plus a step from now.
 */
export function steppedValidity(ttl_s: number, now_s: number): { issued_at: number; expires_at: number } {
  const step_s = Math.max(1, Math.min(URL_EXPIRY_STEP_S, ttl_s));
  const issued_at = Math.floor(now_s / step_s) * step_s;
  return { issued_at, expires_at: issued_at + step_s + ttl_s };
}

/** HMAC-signed URLs of our own GET /v2/files route, for LocalStorage. */
export class UrlSigner implements DownloadUrlSigner {
  constructor(
    private readonly secret: string,
    private readonly ttl_s: number,
  ) {
    if (secret.length < 32) throw new Error('URL signing secret too short');
  }

  private mac(key: string, expires_at: number): string {
    return createHmac('sha256', this.secret).update(`${key}\n${expires_at}`).digest('base64url');
  }

  /** Path and query of a signed URL for `key`, valid at least ttl from now (steppedValidity: the same URL for a while). */
  sign(key: string, now_s: number = Math.floor(Date.now() / 1000)): { path: string; expires_at: number } {
    const { expires_at } = steppedValidity(this.ttl_s, now_s);
    return { path: `/v2/files/${key}?expires=${expires_at}&signature=${this.mac(key, expires_at)}`, expires_at };
  }

  async downloadUrl(key: string, baseUrl: string): Promise<DownloadUrl> {
    const signed = this.sign(key);
    return { url: baseUrl + signed.path, expires_at: signed.expires_at };
  }

  verify(
    key: string,
    expires: string | undefined,
    signature: string | undefined,
    now_s: number = Math.floor(Date.now() / 1000),
  ): 'ok' | 'expired' | 'invalid' {
    if (!expires || !signature || !/^\d{1,12}$/.test(expires) || signature.length > 100) return 'invalid';
    const expected = Buffer.from(this.mac(key, Number(expires)));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return 'invalid';
    return Number(expires) < now_s ? 'expired' : 'ok';
  }
}
