// Configuration: read once from the environment, validated by zod, with units in every name.
// A bad value ends the process with one clear line (see ConfigError), never a stack trace.
import path from 'node:path';
import { z } from 'zod';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const boolish = z.enum(['on', 'off', 'true', 'false', '1', '0']).transform((v) => v === 'on' || v === 'true' || v === '1');
const intFrom = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const EnvSchema = z.object({
  NODE_ENV: z.string().optional(),
  PORT: intFrom(0, 65535).default(8080),
  HOST: z.string().default('127.0.0.1'),
  PUBLIC_BASE_URL: z.string().url().optional(),
  DATA_DIR: z.string().default('./.data'),
  DATABASE_URL: z.string().url().optional(),
  EMBEDDED_PG_PORT: intFrom(1024, 65535).default(54329),
  DATABASE_POOL_MAX: intFrom(1, 200).default(10),
  TEMPORAL_ADDRESS: z.string().optional(),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  TEMPORAL_TASK_QUEUE: z.string().default('video-voice-api'),
  TEMPORAL_CLI_PATH: z.string().optional(),
  TEMPORAL_DEV_PORT: intFrom(1024, 65535).default(7233),
  TEMPORAL_UI_PORT: intFrom(1024, 65535).default(8233),
  ADMIN_TOKEN: z.string().min(16, 'ADMIN_TOKEN must be at least 16 characters').optional(),
  URL_SIGNING_SECRET: z.string().min(32, 'URL_SIGNING_SECRET must be at least 32 characters').optional(),
  VIDEO_POLL_INTERVAL_MS: intFrom(10, 600_000).default(5_000),
  VIDEO_POLL_MAX_INTERVAL_MS: intFrom(10, 3_600_000).default(60_000),
  VIDEO_JOB_TIMEOUT_MS: intFrom(1_000, 7 * 24 * 3_600_000).default(30 * 60_000),
  SIGNED_URL_TTL_S: intFrom(10, 7 * 24 * 3600).default(3600),
  SIMULATOR: boolish.optional(),
  VOICE_PROVIDER: z.enum(['simulator', 'elevenlabs', 'none']).optional(),
  RATE_LIMIT_PER_MINUTE: intFrom(1, 1_000_000).default(120),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
});

/** Every environment variable the service reads. */
export const ENV_VARS: readonly string[] = Object.keys(EnvSchema.shape);

export interface Config {
  production: boolean;
  port: number;
  host: string;
  publicBaseUrl: string | undefined;
  dataDir: string;
  databaseUrl: string | undefined;
  embeddedPgPort: number;
  databasePoolMax: number;
  temporal: {
    address: string | undefined;
    namespace: string;
    taskQueue: string;
    cliPath: string | undefined;
    devPort: number;
    uiPort: number;
  };
  adminToken: string | undefined;
  urlSigningSecret: string | undefined;
  video: {
    pollIntervalMs: number;
    pollMaxIntervalMs: number;
    jobTimeoutMs: number;
  };
  signedUrlTtlS: number;
  simulator: boolean;
  voiceProvider: 'simulator' | 'elevenlabs' | 'none';
  rateLimitPerMinute: number;
  logLevel: 'debug' | 'info' | 'warn' | 'error' | 'silent';
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v !== '') cleaned[k] = v;
  const parsed = EnvSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`invalid environment variable ${String(issue.path[0])}: ${issue.message}`);
  }
  const e = parsed.data;
  const production = e.NODE_ENV === 'production';
  const simulator = e.SIMULATOR ?? !production;
  if (e.VIDEO_POLL_MAX_INTERVAL_MS < e.VIDEO_POLL_INTERVAL_MS) {
    throw new ConfigError('VIDEO_POLL_MAX_INTERVAL_MS must be >= VIDEO_POLL_INTERVAL_MS');
  }
  return {
    production,
    port: e.PORT,
    host: e.HOST,
    publicBaseUrl: e.PUBLIC_BASE_URL?.replace(/\/+$/, ''),
    dataDir: path.resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    embeddedPgPort: e.EMBEDDED_PG_PORT,
    databasePoolMax: e.DATABASE_POOL_MAX,
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.TEMPORAL_TASK_QUEUE,
      cliPath: e.TEMPORAL_CLI_PATH,
      devPort: e.TEMPORAL_DEV_PORT,
      uiPort: e.TEMPORAL_UI_PORT,
    },
    adminToken: e.ADMIN_TOKEN,
    urlSigningSecret: e.URL_SIGNING_SECRET,
    video: {
      pollIntervalMs: e.VIDEO_POLL_INTERVAL_MS,
      pollMaxIntervalMs: e.VIDEO_POLL_MAX_INTERVAL_MS,
      jobTimeoutMs: e.VIDEO_JOB_TIMEOUT_MS,
    },
    signedUrlTtlS: e.SIGNED_URL_TTL_S,
    simulator,
    voiceProvider: e.VOICE_PROVIDER ?? (simulator ? 'simulator' : 'none'),
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    logLevel: e.LOG_LEVEL,
  };
}
