// Structured JSON logs (pino). Secrets are redacted wherever they could appear: API keys, the admin
// token, the URL signing secret, the metrics token, Authorization and Cookie headers, also when an
// error object carries request headers or a client config.
import { pino, type DestinationStream, type Logger } from 'pino';
import { traceLogFields, tracingOn } from './telemetry/index.js';

const SECRET_FIELDS = [
  'authorization',
  'cookie',
  'key',
  'api_key',
  'token',
  'admin_token',
  'adminToken',
  'metrics_token',
  'metricsToken',
  'secret',
  'url_signing_secret',
  'urlSigningSecret',
  'password',
  'apiKey',
  'accessToken',
  'secretAccessKey',
  'sessionToken',
  'credentials',
];

export const REDACT_PATHS = [
  ...SECRET_FIELDS,
  ...SECRET_FIELDS.map((f) => `*.${f}`),
  'req.headers.authorization',
  'req.headers.cookie',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["xi-api-key"]',
  'err.req',
  'err.request',
  'err.config',
];

/**
 * `destination` (default stdout) lets tests capture the lines. With tracing on, a line written inside a
 * span carries its trace_id and span_id.
 */
export function createLogger(level: string, name: string, destination?: DestinationStream): Logger {
  const options = { name, level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, ...(tracingOn() ? { mixin: traceLogFields } : {}) };
  return destination ? pino(options, destination) : pino(options);
}
export type { Logger };
