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

  /** Path and query of a signed URL for `key`, valid until now + ttl. */
  sign(key: string, now_s: number = Math.floor(Date.now() / 1000)): { path: string; expires_at: number } {
    const expires_at = now_s + this.ttl_s;
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
