// Object storage on the local disk under DATA_DIR/storage. Keys are validated so a key can never
// name a path outside the storage root. Writes are atomic (temp file + rename).
import fs from 'node:fs/promises';
import { createReadStream, type ReadStream } from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';

const KEY_PATTERN = /^[a-z0-9_-]+(\/[a-zA-Z0-9_.-]+){1,4}$/;

export function isValidStorageKey(key: string): boolean {
  return key.length <= 300 && KEY_PATTERN.test(key) && !key.split('/').some((seg) => seg === '.' || seg === '..');
}

export interface Storage {
  put(key: string, body: Buffer): Promise<void>;
  /** A readable stream and size, or null when the object does not exist. */
  open(key: string): Promise<{ stream: ReadStream; bytes: number } | null>;
}

export class LocalStorage implements Storage {
  constructor(private readonly root: string) {}

  private pathOf(key: string): string {
    if (!isValidStorageKey(key)) throw new Error(`invalid storage key: ${key}`);
    return path.join(this.root, ...key.split('/'));
  }

  async put(key: string, body: Buffer): Promise<void> {
    const target = this.pathOf(key);
    await fs.mkdir(path.dirname(target), { recursive: true });
    const tmp = `${target}.${randomUUID()}.tmp`;
    await fs.writeFile(tmp, body);
    await fs.rename(tmp, target);
  }

  async open(key: string): Promise<{ stream: ReadStream; bytes: number } | null> {
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
