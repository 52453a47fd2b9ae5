// Ids: what a UUID looks like, and ids derived from names (the same kind, workspace and Idempotency-Key
// always name the same object).
import { createHash } from 'node:crypto';

/** A name-based UUID (version 5 layout, SHA-256) of `kind`, the workspace and the client's key. */
export function uuidForKey(kind: string, workspaceId: string, key: string): string {
  const h = createHash('sha256').update(`${kind}\n${workspaceId}\n${key}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x50; // version 5-style (name-based)
  h[8] = (h[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const hex = h.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether `s` is a UUID as the service writes them (lower-case hex): anything else names nothing it stores. */
export function isUuid(s: string): boolean {
  return UUID.test(s);
}
