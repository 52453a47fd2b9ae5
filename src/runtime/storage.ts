// Where generated videos and speech audio are kept (local disk or an S3 bucket) and how customers
// download them (signed URLs).
import path from 'node:path';
import { ConfigError, type Config } from '../config.js';
import { LocalStorage, type Storage } from '../storage/local.js';
import { UrlSigner, type DownloadUrlSigner } from '../storage/signed-urls.js';
import { S3Storage } from '../storage/s3.js';

/** The storage of STORAGE_BACKEND: DATA_DIR/storage, or the S3 bucket (presigned URLs live SIGNED_URL_TTL_S). */
export function createStorage(config: Config): Storage {
  if (config.s3) {
    return new S3Storage({
      bucket: config.s3.bucket,
      region: config.s3.region,
      endpoint: config.s3.endpoint,
      publicEndpoint: config.s3.publicEndpoint,
      forcePathStyle: config.s3.forcePathStyle,
      credentials: config.s3.credentials,
      urlTtlS: config.signedUrlTtlS,
    });
  }
  return new LocalStorage(path.join(config.dataDir, 'storage'));
}

/** Startup check: a bucket that cannot be reached is a one-line ConfigError, not a failed job later. */
export async function checkStorage(storage: Storage): Promise<void> {
  if (storage instanceof S3Storage) {
    await storage.check().catch((err: Error) => {
      throw new ConfigError(err.message);
    });
  }
}

export function closeStorage(storage: Storage): void {
  if (storage instanceof S3Storage) storage.destroy();
}

/**
 * How customers download stored outputs. S3 hands out its own presigned URLs; local storage is
 * served by GET /v2/files behind our HMAC-signed URLs (`files`), which is mounted only then.
 */
export function createDownloads(
  storage: Storage,
  urlSigningSecret: string,
  ttl_s: number,
): {
  downloadUrls: DownloadUrlSigner;
  files: { storage: Storage; signer: UrlSigner } | null;
} {
  if (storage instanceof S3Storage) return { downloadUrls: storage, files: null };
  const signer = new UrlSigner(urlSigningSecret, ttl_s);
  return { downloadUrls: signer, files: { storage, signer } };
}
