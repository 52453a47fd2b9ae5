// Object storage in an S3-compatible bucket (AWS S3, MinIO, ...), selected by STORAGE_BACKEND=s3.
// Customers download straight from the bucket through presigned GET URLs (SigV4 query signing),
// valid for SIGNED_URL_TTL_S; the bucket itself stays private. Keys follow the same rules as
// LocalStorage. Credentials come from the config's AWS_* variables when given, else from the SDK's
// default provider chain (profiles, web identity, container/instance roles); they are never logged.
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { contentTypeOfKey, isValidStorageKey, type Storage } from './local.js';
import { steppedValidity, type DownloadUrl, type DownloadUrlSigner } from './signed-urls.js';

export interface S3StorageOptions {
  bucket: string;
  region: string;
  /** Endpoint the service talks to (MinIO, another S3-compatible server); unset = AWS. */
  endpoint?: string | undefined;
  /** Endpoint customers reach, for presigned URLs, when it differs from `endpoint` (e.g. a container name vs localhost). */
  publicEndpoint?: string | undefined;
  /** Path-style URLs (endpoint/bucket/key) instead of virtual-hosted (bucket.endpoint/key): MinIO needs them. */
  forcePathStyle?: boolean;
  /** Explicit credentials; unset = the SDK's default provider chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string | undefined } | undefined;
  /** Lifetime of the URLs downloadUrl() hands out. */
  urlTtlS: number;
}

/** SigV4 presigned URLs live at most 7 days. */
export const PRESIGN_TTL_S_MAX = 7 * 24 * 3600;

export class S3Storage implements Storage, DownloadUrlSigner {
  readonly bucket: string;
  private readonly client: S3Client;
  /** Signs for the public endpoint: the signature covers the host customers send. */
  private readonly presignClient: S3Client;
  private readonly urlTtlS: number;

  constructor(opts: S3StorageOptions) {
    if (opts.urlTtlS < 1 || opts.urlTtlS > PRESIGN_TTL_S_MAX) throw new Error(`presigned URL lifetime must be 1..${PRESIGN_TTL_S_MAX} s`);
    this.bucket = opts.bucket;
    this.urlTtlS = opts.urlTtlS;
    const base: S3ClientConfig = {
      region: opts.region,
      forcePathStyle: opts.forcePathStyle ?? false,
      ...(opts.credentials ? { credentials: opts.credentials } : {}),
      // Fail a stuck connection or a silent socket instead of hanging the activity; the SDK retries.
      requestHandler: { connectionTimeout: 5_000, requestTimeout: 60_000 },
      maxAttempts: 3,
    };
    this.client = new S3Client({ ...base, ...(opts.endpoint ? { endpoint: opts.endpoint } : {}) });
    const publicEndpoint = opts.publicEndpoint ?? opts.endpoint;
    this.presignClient =
      publicEndpoint === opts.endpoint ? this.client : new S3Client({ ...base, ...(publicEndpoint ? { endpoint: publicEndpoint } : {}) });
  }

  private checkKey(key: string): void {
    if (!isValidStorageKey(key)) throw new Error(`invalid storage key: ${key}`);
  }

  /** Fails with a short reason when the bucket cannot be reached with these credentials (startup check). */
  async check(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      const e = err as Error & { $metadata?: { httpStatusCode?: number } };
      const status = e.$metadata?.httpStatusCode;
      const reason = status === 404 ? 'no such bucket' : status === 403 ? 'access denied' : `${e.name}: ${e.message}`;
      throw new Error(`cannot use S3 bucket "${this.bucket}": ${reason}`);
    }
  }

  async put(key: string, body: Buffer, content_type?: string): Promise<void> {
    this.checkKey(key);
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: key,
        Body: body,
        ContentLength: body.length,
        ContentType: content_type ?? contentTypeOfKey(key),
      }),
    );
  }

  async delete(key: string): Promise<void> {
    this.checkKey(key);
    // S3's DeleteObject succeeds for a key that does not exist.
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  async open(key: string): Promise<{ stream: Readable; bytes: number } | null> {
    if (!isValidStorageKey(key)) return null;
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return { stream: out.Body as Readable, bytes: out.ContentLength ?? 0 };
    } catch (err) {
      const e = err as Error & { $metadata?: { httpStatusCode?: number } };
      if (e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404) return null;
      throw err;
    }
  }

  /** A presigned GET URL for `key`, valid for `ttl_s` seconds from `now_s`. Computed locally: no request to S3. */
  async presign(key: string, ttl_s: number, now_s: number = Math.floor(Date.now() / 1000)): Promise<DownloadUrl> {
    this.checkKey(key);
    if (!Number.isInteger(ttl_s) || ttl_s < 1 || ttl_s > PRESIGN_TTL_S_MAX)
      throw new Error(`presigned URL lifetime must be 1..${PRESIGN_TTL_S_MAX} s`);
    const url = await getSignedUrl(this.presignClient, new GetObjectCommand({ Bucket: this.bucket, Key: key }), {
      expiresIn: ttl_s,
      signingDate: new Date(now_s * 1000),
    });
    return { url, expires_at: now_s + ttl_s };
  }

  /**
   * DownloadUrlSigner: presigned for at least SIGNED_URL_TTL_S, signed at the start of the current step
   * (steppedValidity), so the URL stays the same for a while; the API's base URL is not involved.
   */
  downloadUrl(key: string, _baseUrl: string): Promise<DownloadUrl> {
    const { issued_at, expires_at } = steppedValidity(this.urlTtlS, Math.floor(Date.now() / 1000));
    return this.presign(key, Math.min(expires_at - issued_at, PRESIGN_TTL_S_MAX), issued_at);
  }

  destroy(): void {
    this.client.destroy();
    if (this.presignClient !== this.client) this.presignClient.destroy();
  }
}
