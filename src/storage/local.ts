// Object storage on the local disk under DATA_DIR/storage. Keys are validated so a key can never
// name a path outside the storage root. Writes are atomic (temp file + rename).
import fs from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { randomUUID } from 'node:crypto';

const KEY_PATTERN = /^[a-z0-9_-]+(\/[a-zA-Z0-9_.-]+){1,4}$/;

export function isValidStorageKey(key: string): boolean {
  return key.length <= 300 && KEY_PATTERN.test(key) && !key.split('/').some((seg) => seg === '.' || seg === '..');
}

/** The media type of a stored object from its key, when the writer names none. */
export function contentTypeOfKey(key: string): string {
  return key.endsWith('.mp4') ? 'video/mp4' : 'application/octet-stream';
}

/**
 * Where outputs are kept: LocalStorage (this file) or S3Storage (./s3.ts), chosen by STORAGE_BACKEND
 * in src/runtime/storage.ts. Customers never see keys: the API hands out expiring URLs through a
 * DownloadUrlSigner (./signed-urls.ts), which for S3 is the S3Storage itself (presigned GET URLs).
 */
/**
 * Whether a failed write will fail again however often it is retried (a directory where the file goes,
 * a bucket that refuses us), as opposed to a passing fault (a network error, a 5xx, a full disk being freed).
 */
export function isPermanentStorageError(err: unknown): boolean {
  const e = err as { code?: string; $metadata?: { httpStatusCode?: number }; name?: string } | null;
  if (!e || typeof e !== 'object') return false;
  if (e.code && ['EISDIR', 'ENOTDIR', 'EEXIST', 'ENOTEMPTY', 'EINVAL', 'ENAMETOOLONG'].includes(e.code)) return true;
  const status = e.$metadata?.httpStatusCode;
  return status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429;
}

export interface Storage {
  /** Stores `body` under `key`, replacing any object there (a retried write overwrites, never duplicates). */
  put(key: string, body: Buffer, content_type?: string): Promise<void>;
  /** A readable stream and size, or null when the object does not exist. */
  open(key: string): Promise<{ stream: Readable; bytes: number } | null>;
  /** Removes the object; removing one that does not exist is not an error (idempotent). */
  delete(key: string): Promise<void>;
}

export class LocalStorage implements Storage {
  constructor(private readonly root: string) {}

  private pathOf(key: string): string {
    if (!isValidStorageKey(key)) throw new Error(`invalid storage key: ${key}`);
    return path.join(this.root, ...key.split('/'));
  }

  /** The content type is implied by the key's extension here (see contentTypeOfKey); /v2/files serves it. */
  async put(key: string, body: Buffer, _content_type?: string): Promise<void> {
    const target = this.pathOf(key);
    await fs.mkdir(path.dirname(target), { recursive: true });
    const tmp = `${target}.${randomUUID()}.tmp`;
    await fs.writeFile(tmp, body);
    await fs.rename(tmp, target);
  }

  async delete(key: string): Promise<void> {
    await fs.rm(this.pathOf(key), { force: true });
  }

  async open(key: string): Promise<{ stream: Readable; bytes: number } | null> {
    if (!isValidStorageKey(key)) return null;
    const file = this.pathOf(key);
    try {
      const st = await fs.stat(file);
      if (!st.isFile()) return null;
      return { stream: createReadStream(file), bytes: st.size };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }
}
