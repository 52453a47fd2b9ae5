// Standard Webhooks signatures, symmetric scheme (spec: github.com/standard-webhooks/standard-webhooks,
// spec/standard-webhooks.md): the secret is `whsec_` + base64 of random bytes; a message is signed as
// `v1,` + base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")), the key being the
// base64-decoded part after `whsec_`.
import { createHmac, randomBytes } from 'node:crypto';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
/** The spec asks for 24 to 64 random bytes. */
export const WEBHOOK_SECRET_BYTES = 32;

export function generateWebhookSecret(): string {
  return WEBHOOK_SECRET_PREFIX + randomBytes(WEBHOOK_SECRET_BYTES).toString('base64');
}

/** The `webhook-signature` header value of one message. */
export function signWebhook(secret: string, webhookId: string, timestamp_s: number, body: string): string {
  if (!secret.startsWith(WEBHOOK_SECRET_PREFIX)) throw new Error('not a whsec_ secret');
  if (webhookId.includes('.')) throw new Error('a webhook id never contains "."');
  if (!Number.isSafeInteger(timestamp_s) || timestamp_s < 0) throw new Error(`invalid webhook timestamp ${timestamp_s}`);
  const key = Buffer.from(secret.slice(WEBHOOK_SECRET_PREFIX.length), 'base64');
  const mac = createHmac('sha256', key).update(`${webhookId}.${timestamp_s}.${body}`, 'utf8').digest('base64');
  return `v1,${mac}`;
}
