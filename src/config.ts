// Configuration: read once from the environment, validated by zod, with units in every name.
// A bad value ends the process with one clear line (see ConfigError), never a stack trace.
import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_CONCURRENT_POLLS_MAX, DEFAULT_WORKER_LIMITS, type WorkerLimits } from './temporal/worker-limits.js';
import { boolish } from './providers/descriptor.js';
import { configureProviders, PROVIDERS_ENV, type ConfiguredProviders } from './providers/registry.js';
import { PROVIDER_CALLBACK_LIMITS } from './video-jobs/callbacks.js';
import type { SpeechSocketLimits } from './voices/speech-socket-protocol.js';
import { ConfigError } from './config-error.js';
import { useCatalogFile } from './models/catalog.js';
import { loadTemporalSettings, temporalEnv, type TemporalSettings } from './temporal/connection-config.js';
import { TASK_QUEUE_NAME } from './temporal/workflow-states.js';

export { ConfigError };

const intFrom = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/** Polls of a running job back off x1.5 from VIDEO_POLL_INTERVAL_MS up to this, by default. */
const DEFAULT_POLL_INTERVAL_MS_MAX = 5_000;

const EnvSchema = z.object({
  NODE_ENV: z.string().optional(),
  PORT: intFrom(0, 65535).default(8080),
  HOST: z.string().default('127.0.0.1'),
  PUBLIC_BASE_URL: z.string().url().optional(),
  DATA_DIR: z.string().default('./.data'),
  DATABASE_URL: z.string().url().optional(),
  EMBEDDED_PG_PORT: intFrom(1024, 65535).default(54329),
  DATABASE_POOL_MAX: intFrom(1, 200).default(10),
  // Temporal's own client configuration (read by @temporalio/envconfig: src/temporal/connection-config.ts).
  TEMPORAL_ADDRESS: z.string().optional(),
  TEMPORAL_NAMESPACE: z.string().optional(),
  TEMPORAL_API_KEY: z.string().optional(),
  TEMPORAL_TLS: z.string().optional(),
  TEMPORAL_TLS_CLIENT_CERT_PATH: z.string().optional(),
  TEMPORAL_TLS_CLIENT_CERT_DATA: z.string().optional(),
  TEMPORAL_TLS_CLIENT_KEY_PATH: z.string().optional(),
  TEMPORAL_TLS_CLIENT_KEY_DATA: z.string().optional(),
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: z.string().optional(),
  TEMPORAL_TLS_SERVER_CA_CERT_DATA: z.string().optional(),
  TEMPORAL_TLS_SERVER_NAME: z.string().optional(),
  TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: z.string().optional(),
  TEMPORAL_CONFIG_FILE: z.string().optional(),
  TEMPORAL_PROFILE: z.string().optional(),
  TEMPORAL_CREDENTIALS_CHECK_INTERVAL_MS: intFrom(100, 3_600_000).default(5_000),
  TEMPORAL_TASK_QUEUE: z.string().regex(TASK_QUEUE_NAME, 'letters, digits and . _ : - only (1-200)').default('video-voice-api'),
  TEMPORAL_CLI_PATH: z.string().optional(),
  TEMPORAL_DEV_PORT: intFrom(1024, 65535).default(7233),
  TEMPORAL_UI_PORT: intFrom(1024, 65535).default(8233),
  ADMIN_TOKEN: z.string().min(16, 'ADMIN_TOKEN must be at least 16 characters').optional(),
  URL_SIGNING_SECRET: z.string().min(32, 'URL_SIGNING_SECRET must be at least 32 characters').optional(),
  VIDEO_POLL_INTERVAL_MS: intFrom(10, 600_000).default(1_000),
  VIDEO_POLL_MAX_INTERVAL_MS: intFrom(10, 3_600_000).optional(),
  VIDEO_JOB_TIMEOUT_MS: intFrom(1_000, 7 * 24 * 3_600_000).default(30 * 60_000),
  VIDEO_CREATE_TIMEOUT_MS: intFrom(3_000, 120_000).default(30_000),
  RECONCILE_INTERVAL_MS: intFrom(1_000, 24 * 3_600_000).default(60_000),
  WEBHOOK_MAX_CONCURRENT_ATTEMPTS: intFrom(1, 1_000).default(20),
  WEBHOOK_MAX_ATTEMPTS_PER_SECOND: intFrom(1, 10_000).default(50),
  WORKER_MAX_CACHED_WORKFLOWS: intFrom(2, 100_000).default(DEFAULT_WORKER_LIMITS.maxCachedWorkflows),
  WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: intFrom(2, 10_000).default(DEFAULT_WORKER_LIMITS.maxConcurrentWorkflowTaskExecutions),
  WORKER_MAX_CONCURRENT_ACTIVITIES: intFrom(1, 100_000).default(DEFAULT_WORKER_LIMITS.maxConcurrentActivityTaskExecutions),
  WORKER_MAX_CONCURRENT_POLLS: intFrom(1, 1_000).default(DEFAULT_CONCURRENT_POLLS_MAX),
  WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES: intFrom(1, 10_000).default(DEFAULT_WORKER_LIMITS.maxConcurrentLocalActivityExecutions),
  SIGNED_URL_TTL_S: intFrom(10, 7 * 24 * 3600).default(3600),
  STORAGE_BACKEND: z.enum(['local', 's3']).default('local'),
  S3_BUCKET: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'not a valid S3 bucket name')
    .optional(),
  S3_REGION: z
    .string()
    .regex(/^[a-z0-9-]{2,40}$/, 'not a region name')
    .default('us-east-1'),
  S3_ENDPOINT: z.string().url().optional(),
  S3_PUBLIC_ENDPOINT: z.string().url().optional(),
  S3_FORCE_PATH_STYLE: boolish.optional(),
  // The standard AWS SDK variables: used for S3 when set, else the SDK's default chain applies.
  AWS_ACCESS_KEY_ID: z.string().optional(),
  AWS_SECRET_ACCESS_KEY: z.string().optional(),
  AWS_SESSION_TOKEN: z.string().optional(),
  // The providers' own variables (SIMULATOR, VOICE_PROVIDER, ELEVENLABS_*, VERTEX_*, FAL_*, REPLICATE_*), from their descriptors;
  // VOICE_CONSENT_REQUIRED keeps its place after SIMULATOR, so the first invalid variable reported is the one it always was.
  SIMULATOR: PROVIDERS_ENV['SIMULATOR']!,
  VOICE_CONSENT_REQUIRED: boolish.optional(),
  ...PROVIDERS_ENV,
  // The operator's model catalog (YAML or JSON), replacing the built-in config/models.yaml.
  MODELS_FILE: z.string().optional(),
  RATE_LIMIT_PER_MINUTE: intFrom(1, 1_000_000).default(120),
  RATE_LIMIT_READS_PER_MINUTE: intFrom(1, 10_000_000).default(600),
  // Provider callbacks (no API key): requests per minute from one source address, and bodies read at
  // once per API process.
  PROVIDER_CALLBACKS_PER_SOURCE_PER_MINUTE: intFrom(1, 1_000_000).default(PROVIDER_CALLBACK_LIMITS.per_source_per_minute),
  PROVIDER_CALLBACK_READS_MAX: intFrom(1, 1_000).default(PROVIDER_CALLBACK_LIMITS.reads_max),
  MAX_PENDING_JOBS_PER_WORKSPACE: intFrom(1, 1_000_000).default(50),
  BATCH_CONCURRENCY: intFrom(1, 1_000).default(10),
  VOICE_CLONES_PER_WORKSPACE: intFrom(1, 10_000).default(10),
  WEBHOOK_MAX_CONCURRENT_ATTEMPTS_PER_WORKSPACE: intFrom(1, 1_000).default(4),
  SPEECH_AUDIO_RETENTION_MS: intFrom(60_000, 365 * 24 * 3_600_000).default(24 * 3_600_000),
  // The speech WebSocket's limits (src/voices/speech-socket.ts) and its browsers' tokens' lifetime.
  SPEECH_WS_CONTEXTS_MAX: intFrom(1, 1_000).default(10),
  SPEECH_WS_SOCKETS_PER_KEY_MAX: intFrom(1, 10_000).default(20),
  SPEECH_WS_MESSAGE_CHARS_MAX: intFrom(1, 100_000).default(5_000),
  SPEECH_WS_CONTEXT_CHARS_MAX: intFrom(1, 1_000_000).default(50_000),
  SPEECH_WS_IDLE_MS: intFrom(100, 3_600_000).default(30_000),
  SPEECH_WS_FRAME_BYTES_MAX: intFrom(1_024, 16 * 1024 * 1024).default(64 * 1024),
  SPEECH_WS_BUFFERED_BYTES_MAX: intFrom(1_024, 256 * 1024 * 1024).default(1024 * 1024),
  SPEECH_TOKEN_TTL_S: intFrom(10, 3_600).default(60),
  WEBHOOK_RETRY_INITIAL_MS: intFrom(10, 3_600_000).default(5_000),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  METRICS_TOKEN: z.string().min(16, 'METRICS_TOKEN must be at least 16 characters').optional(),
  WORKER_METRICS_PORT: intFrom(1, 65535).optional(),
  APP_METRICS_PORT: intFrom(0, 65535).optional(),
  ADMIN_PORT: intFrom(0, 65535).optional(),
  // Buying credits with Stripe (src/payments/): off without the secret key; the webhook's signing secret is then required.
  STRIPE_SECRET_KEY: z
    .string()
    .regex(/^(sk|rk)_[A-Za-z0-9_]+$/, 'not a Stripe secret key (sk_... or rk_...)')
    .optional(),
  STRIPE_WEBHOOK_SECRET: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/=_]+$/, 'not a Stripe webhook signing secret (whsec_...)')
    .optional(),
  STRIPE_API_BASE: z.string().url().optional(),
  STRIPE_TOPUP_MIN_EUR: z.coerce.number().min(0.5).max(1_000_000).default(5),
  STRIPE_TOPUP_MAX_EUR: z.coerce.number().min(0.5).max(1_000_000).default(1000),
  /** Read by src/telemetry/tracing.ts before the config loads (addresses or CIDR ranges whose trace context is followed). */
  TRACING_TRUSTED_CALLERS: z.string().optional(),
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
    /** From Temporal's client configuration; unset = `npm start` runs a dev server. */
    address: string | undefined;
    namespace: string;
    /** Temporal's client configuration (secrets included: never log it). */
    connection: TemporalSettings;
    /** The variables it was read from: read again when credentials rotate. */
    env: Record<string, string>;
    /** How often the credential files are checked for a change. */
    credentialsCheckIntervalMs: number;
    taskQueue: string;
    cliPath: string | undefined;
    devPort: number;
    uiPort: number;
  };
  adminToken: string | undefined;
  urlSigningSecret: string | undefined;
  video: {
    pollIntervalMs: number;
    pollIntervalMsMax: number;
    jobTimeoutMs: number;
    /** How long a create waits for its charge step before answering 503 (nothing charged). */
    createTimeoutMs: number;
  };
  /** How often the money reconciler runs (a Temporal Schedule). */
  reconcileIntervalMs: number;
  /** Cache and slots of a worker: its memory is bounded by these, not by the number of pending jobs. */
  workerLimits: WorkerLimits;
  /** Provider polls a worker's poller runs at once; pending jobs are rows, not bounded by it. */
  workerConcurrentPollsMax: number;
  signedUrlTtlS: number;
  /** Where outputs are stored: DATA_DIR/storage (local) or an S3-compatible bucket. */
  storageBackend: 'local' | 's3';
  /** Set when storageBackend is s3. */
  s3: S3Config | null;
  /** The providers this process serves (src/providers/registry.ts): the video backends enabled and the voice provider, with their settings. */
  providers: ConfiguredProviders;
  /** VOICE_CONSENT_REQUIRED (default: on in production): a clone must name a voice consent. */
  voiceConsentRequired: boolean;
  /** The model catalog in use (MODELS_FILE, else the built-in config/models.yaml), validated and installed by loadConfig. */
  modelsFile: string;
  /** Requests that change something (creates, cancels, deletes), per API key and minute. */
  rateLimitPerMinute: number;
  /** Reads (GET), per API key and minute: a separate budget, so polling never blocks a create. */
  rateLimitReadsPerMinute: number;
  /** PROVIDER_CALLBACKS_PER_SOURCE_PER_MINUTE and PROVIDER_CALLBACK_READS_MAX. */
  providerCallbackLimits: { per_source_per_minute: number; reads_max: number };
  /** Jobs a workspace may have pending at once unless the admin API sets its own figure (429 beyond). */
  pendingJobsPerWorkspaceMax: number;
  /** Requests of a workspace's batches in flight at once (BATCH_CONCURRENCY). */
  batchConcurrency: number;
  /** Cloned voices a workspace may hold at once (each takes a slot of the shared provider account). */
  voiceClonesPerWorkspace: number;
  /** How long delivered speech audio is kept for replays of its Idempotency-Key (then 410). */
  speechAudioRetentionMs: number;
  /** The speech WebSocket's limits (SPEECH_WS_*). */
  speechSocket: SpeechSocketLimits;
  /** How long a token of POST /v2/audio/speech/tokens opens sockets (SPEECH_TOKEN_TTL_S). */
  speechTokenTtlS: number;
  webhooks: {
    /** Delivery attempts of one workspace in progress at once across the task queue's workers. */
    concurrentAttemptsPerWorkspaceMax: number;
    /** First retry interval of a failed webhook delivery (then doubled per attempt, for 24 hours). */
    retryInitialMs: number;
    /** Delivery attempts a worker process runs at once, and the whole task queue starts per second. */
    concurrentAttemptsMax: number;
    attemptsPerSecondMax: number;
  };
  logLevel: 'debug' | 'info' | 'warn' | 'error' | 'silent';
  /** Bearer token required by GET /metrics when set. */
  metricsToken: string | undefined;
  /** Port of the Temporal SDK's Prometheus exporter in processes running a worker; unset = off. */
  workerMetricsPort: number | undefined;
  /** Port of the app's /metrics in a worker-only process (`npm run worker`); unset = off. */
  appMetricsPort: number | undefined;
  /** ADMIN_PORT: the operators' API (/admin) on a listener of its own, and no longer on PORT; unset = on PORT. */
  adminPort: number | undefined;
  /** Buying credits with Stripe; null without STRIPE_SECRET_KEY (the billing routes then answer 503). */
  stripe: StripeConfig | null;
}

export interface StripeConfig {
  /** Not enumerable: never serialised or logged. */
  secretKey: string;
  /** The webhook endpoint's signing secret (whsec_...). Not enumerable. */
  webhookSecret: string;
  /** STRIPE_API_BASE: another base URL for Stripe's API (stripe-mock in tests); unset = Stripe's own. */
  apiBase: URL | undefined;
  topupMicroEurMin: number;
  topupMicroEurMax: number;
}

/** STRIPE_*: null without a secret key; with one, the webhook secret is required and the bounds must make sense. */
function stripeConfigOf(e: z.infer<typeof EnvSchema>): StripeConfig | null {
  if (!e.STRIPE_SECRET_KEY) return null;
  if (!e.STRIPE_WEBHOOK_SECRET) {
    throw new ConfigError(
      'STRIPE_WEBHOOK_SECRET must be set when STRIPE_SECRET_KEY is (the signing secret of the Stripe webhook endpoint)',
    );
  }
  const min = Math.round(e.STRIPE_TOPUP_MIN_EUR * 100) * 10_000;
  const max = Math.round(e.STRIPE_TOPUP_MAX_EUR * 100) * 10_000;
  if (max < min) throw new ConfigError('STRIPE_TOPUP_MAX_EUR must be >= STRIPE_TOPUP_MIN_EUR');
  const stripe: StripeConfig = {
    secretKey: '',
    webhookSecret: '',
    apiBase: e.STRIPE_API_BASE ? new URL(e.STRIPE_API_BASE) : undefined,
    topupMicroEurMin: min,
    topupMicroEurMax: max,
  };
  Object.defineProperty(stripe, 'secretKey', { value: e.STRIPE_SECRET_KEY, enumerable: false });
  Object.defineProperty(stripe, 'webhookSecret', { value: e.STRIPE_WEBHOOK_SECRET, enumerable: false });
  return stripe;
}

export interface S3Config {
  bucket: string;
  region: string;
  endpoint: string | undefined;
  /** Endpoint in customers' presigned URLs when it differs from `endpoint`. */
  publicEndpoint: string | undefined;
  forcePathStyle: boolean;
  /** From AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN); unset = the SDK's default chain. Not enumerable: never serialised or logged. */
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string | undefined } | undefined;
}

function s3ConfigOf(e: z.infer<typeof EnvSchema>): S3Config | null {
  if (e.STORAGE_BACKEND !== 's3') return null;
  if (!e.S3_BUCKET) throw new ConfigError('S3_BUCKET must be set when STORAGE_BACKEND=s3');
  if (!e.AWS_ACCESS_KEY_ID !== !e.AWS_SECRET_ACCESS_KEY)
    throw new ConfigError('set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither');
  const s3: S3Config = {
    bucket: e.S3_BUCKET,
    region: e.S3_REGION,
    endpoint: e.S3_ENDPOINT?.replace(/\/+$/, ''),
    publicEndpoint: e.S3_PUBLIC_ENDPOINT?.replace(/\/+$/, ''),
    forcePathStyle: e.S3_FORCE_PATH_STYLE ?? false,
    credentials: undefined,
  };
  const credentials =
    e.AWS_ACCESS_KEY_ID && e.AWS_SECRET_ACCESS_KEY
      ? {
          accessKeyId: e.AWS_ACCESS_KEY_ID,
          secretAccessKey: e.AWS_SECRET_ACCESS_KEY,
          ...(e.AWS_SESSION_TOKEN ? { sessionToken: e.AWS_SESSION_TOKEN } : {}),
        }
      : undefined;
  Object.defineProperty(s3, 'credentials', { value: credentials, enumerable: false });
  return s3;
}

/** Shortest secret (token, signing key, storage secret) a production process accepts. */
export const PRODUCTION_SECRET_MIN_CHARS = 32;
/** Shortest database password a production process accepts (when the URL has one). */
export const PRODUCTION_DB_PASSWORD_MIN_CHARS = 16;
/** Passwords every PostgreSQL tutorial and image uses, and the ones this repository's examples used. */
const WELL_KNOWN_DB_PASSWORDS = new Set(['postgres', 'password', 'videoapi', 'temporal', 'admin', 'secret', 'root']);
/** Words of placeholders (".env.example", documentation), never of a generated secret. */
const PLACEHOLDER = /change[-_ ]?me|placeholder|example|default|your[-_]|replace|xxxx/i;

/** Why a secret is unsafe for production, or null: short, a placeholder, or too few distinct characters. */
export function unsafeSecret(value: string, chars_min: number): string | null {
  if (value.length < chars_min) return `is shorter than ${chars_min} characters`;
  if (PLACEHOLDER.test(value)) return 'is a placeholder';
  if (new Set(value).size < 10) return 'has fewer than 10 distinct characters';
  return null;
}

/**
 * With NODE_ENV=production, every secret that is set must be one an operator generated: long, not a
 * placeholder from an example file, not a well-known password. The process stops with one line
 * naming the variable (never its value) and how to make one.
 */
function checkProductionSecrets(e: z.infer<typeof EnvSchema>): void {
  const fix = 'generate one, e.g. `openssl rand -base64 48`, and set it in .env';
  const secrets: [string, string | undefined][] = [
    ['ADMIN_TOKEN', e.ADMIN_TOKEN],
    ['URL_SIGNING_SECRET', e.URL_SIGNING_SECRET],
    ['METRICS_TOKEN', e.METRICS_TOKEN],
    ['AWS_SECRET_ACCESS_KEY', e.AWS_SECRET_ACCESS_KEY],
    ['STRIPE_WEBHOOK_SECRET', e.STRIPE_WEBHOOK_SECRET],
  ];
  for (const [name, value] of secrets) {
    const why = value === undefined ? null : unsafeSecret(value, PRODUCTION_SECRET_MIN_CHARS);
    if (why) throw new ConfigError(`${name} ${why}; NODE_ENV=production refuses to start with it: ${fix}`);
  }
  if (e.DATABASE_URL) {
    let password = '';
    try {
      password = decodeURIComponent(new URL(e.DATABASE_URL).password);
    } catch {
      password = new URL(e.DATABASE_URL).password;
    }
    const why = !password
      ? null
      : WELL_KNOWN_DB_PASSWORDS.has(password.toLowerCase())
        ? 'is a well-known default'
        : unsafeSecret(password, PRODUCTION_DB_PASSWORD_MIN_CHARS);
    if (why)
      throw new ConfigError(
        `the password in DATABASE_URL ${why}; NODE_ENV=production refuses to start with it: ${fix.replace('base64 48', 'hex 24')}`,
      );
  }
}

/**
 * The environment without its empty variables (an empty value means unset), validated; the first
 * invalid variable refuses with one line naming it.
 */
function parseEnv(env: NodeJS.ProcessEnv): { cleaned: Record<string, string>; e: z.infer<typeof EnvSchema> } {
  const cleaned: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v !== '') cleaned[k] = v;
  const parsed = EnvSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`invalid environment variable ${String(issue.path[0])}: ${issue.message}`);
  }
  return { cleaned, e: parsed.data };
}

/** Where Temporal is and how to reach it (from its own client settings), and this service's use of it. */
function temporalConfigOf(e: z.infer<typeof EnvSchema>, settings: TemporalSettings, clientEnv: Record<string, string>): Config['temporal'] {
  return {
    address: settings.address,
    namespace: settings.namespace,
    connection: settings,
    env: clientEnv,
    credentialsCheckIntervalMs: e.TEMPORAL_CREDENTIALS_CHECK_INTERVAL_MS,
    taskQueue: e.TEMPORAL_TASK_QUEUE,
    cliPath: e.TEMPORAL_CLI_PATH,
    devPort: e.TEMPORAL_DEV_PORT,
    uiPort: e.TEMPORAL_UI_PORT,
  };
}

/** The jobs' worker's slots and cache (WORKER_MAX_*). */
function workerLimitsOf(e: z.infer<typeof EnvSchema>): WorkerLimits {
  return {
    maxCachedWorkflows: e.WORKER_MAX_CACHED_WORKFLOWS,
    maxConcurrentWorkflowTaskExecutions: e.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS,
    maxConcurrentActivityTaskExecutions: e.WORKER_MAX_CONCURRENT_ACTIVITIES,
    maxConcurrentLocalActivityExecutions: e.WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES,
  };
}

/** How webhook deliveries are paced: slots per workspace and in all, attempts a second, the first retry's wait. */
function webhooksConfigOf(e: z.infer<typeof EnvSchema>): Config['webhooks'] {
  return {
    concurrentAttemptsPerWorkspaceMax: e.WEBHOOK_MAX_CONCURRENT_ATTEMPTS_PER_WORKSPACE,
    retryInitialMs: e.WEBHOOK_RETRY_INITIAL_MS,
    concurrentAttemptsMax: e.WEBHOOK_MAX_CONCURRENT_ATTEMPTS,
    attemptsPerSecondMax: e.WEBHOOK_MAX_ATTEMPTS_PER_SECOND,
  };
}

/** The limits of speech over a WebSocket (SPEECH_WS_*). */
function speechSocketConfigOf(e: z.infer<typeof EnvSchema>): Config['speechSocket'] {
  return {
    contexts_per_socket_max: e.SPEECH_WS_CONTEXTS_MAX,
    sockets_per_key_max: e.SPEECH_WS_SOCKETS_PER_KEY_MAX,
    message_chars_max: e.SPEECH_WS_MESSAGE_CHARS_MAX,
    context_chars_max: e.SPEECH_WS_CONTEXT_CHARS_MAX,
    idle_ms: e.SPEECH_WS_IDLE_MS,
    frame_bytes_max: e.SPEECH_WS_FRAME_BYTES_MAX,
    buffered_bytes_max: e.SPEECH_WS_BUFFERED_BYTES_MAX,
  };
}

export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  options: {
    /**
     * false (`npm start`): the Temporal profile file in the user's home, which Temporal's CLI writes, is
     * read only when TEMPORAL_PROFILE names a profile; else TEMPORAL_ADDRESS or TEMPORAL_CONFIG_FILE
     * must say where Temporal is, and without them the dev server runs as it always did.
     */
    userTemporalProfile?: boolean;
  } = {},
): Config {
  const { cleaned, e } = parseEnv(env);
  const production = e.NODE_ENV === 'production';
  if (production && !e.PUBLIC_BASE_URL) {
    // Download URLs are built from it; from a request's Host header they could point anywhere.
    throw new ConfigError('PUBLIC_BASE_URL must be set when NODE_ENV=production (the base of the URLs handed to customers)');
  }
  if (production) checkProductionSecrets(e);
  const temporalClientEnv = temporalEnv(cleaned, { userProfile: options.userTemporalProfile ?? true });
  const temporalSettings = loadTemporalSettings(temporalClientEnv);
  const pollIntervalMsMax = e.VIDEO_POLL_MAX_INTERVAL_MS ?? Math.max(DEFAULT_POLL_INTERVAL_MS_MAX, e.VIDEO_POLL_INTERVAL_MS);
  if (pollIntervalMsMax < e.VIDEO_POLL_INTERVAL_MS) {
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
    temporal: temporalConfigOf(e, temporalSettings, temporalClientEnv),
    adminToken: e.ADMIN_TOKEN,
    urlSigningSecret: e.URL_SIGNING_SECRET,
    video: {
      pollIntervalMs: e.VIDEO_POLL_INTERVAL_MS,
      pollIntervalMsMax,
      jobTimeoutMs: e.VIDEO_JOB_TIMEOUT_MS,
      createTimeoutMs: e.VIDEO_CREATE_TIMEOUT_MS,
    },
    reconcileIntervalMs: e.RECONCILE_INTERVAL_MS,
    workerLimits: workerLimitsOf(e),
    workerConcurrentPollsMax: e.WORKER_MAX_CONCURRENT_POLLS,
    signedUrlTtlS: e.SIGNED_URL_TTL_S,
    storageBackend: e.STORAGE_BACKEND,
    s3: s3ConfigOf(e),
    providers: configureProviders(e, production),
    voiceConsentRequired: e.VOICE_CONSENT_REQUIRED ?? production,
    modelsFile: useCatalogFile(e.MODELS_FILE).file,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    rateLimitReadsPerMinute: e.RATE_LIMIT_READS_PER_MINUTE,
    providerCallbackLimits: { per_source_per_minute: e.PROVIDER_CALLBACKS_PER_SOURCE_PER_MINUTE, reads_max: e.PROVIDER_CALLBACK_READS_MAX },
    pendingJobsPerWorkspaceMax: e.MAX_PENDING_JOBS_PER_WORKSPACE,
    batchConcurrency: e.BATCH_CONCURRENCY,
    voiceClonesPerWorkspace: e.VOICE_CLONES_PER_WORKSPACE,
    speechAudioRetentionMs: e.SPEECH_AUDIO_RETENTION_MS,
    speechSocket: speechSocketConfigOf(e),
    speechTokenTtlS: e.SPEECH_TOKEN_TTL_S,
    webhooks: webhooksConfigOf(e),
    logLevel: e.LOG_LEVEL,
    metricsToken: e.METRICS_TOKEN,
    workerMetricsPort: e.WORKER_METRICS_PORT,
    appMetricsPort: e.APP_METRICS_PORT,
    adminPort: e.ADMIN_PORT,
    stripe: stripeConfigOf(e),
  };
}
