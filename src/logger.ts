// Structured JSON logs (pino). Secrets are redacted wherever they could appear.
import { pino, type Logger } from 'pino';

export function createLogger(level: string, name: string): Logger {
  return pino({
    name,
    level,
    redact: { paths: ['req.headers.authorization', 'authorization', 'key', 'api_key', 'token', '*.key'], censor: '[redacted]' },
  });
}
export type { Logger };
