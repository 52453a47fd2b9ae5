// How this service reaches Temporal: Temporal's own client configuration (@temporalio/envconfig), the
// environment variables and TOML profiles that Temporal's CLI and SDKs read: TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS, TEMPORAL_TLS_CLIENT_CERT_PATH / _DATA,
// TEMPORAL_TLS_CLIENT_KEY_PATH / _DATA, TEMPORAL_TLS_SERVER_CA_CERT_PATH / _DATA,
// TEMPORAL_TLS_SERVER_NAME, TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE, TEMPORAL_GRPC_META_*. An API key
// turns TLS on, as Temporal's envconfig does. The same settings serve the API's client, the workers'
// connection, the reconciler's schedule and readiness.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { loadClientConfigProfile, toClientOptions, type ClientConfigProfile, type ConfigDataSource } from '@temporalio/envconfig';
import type { TLSConfig } from '@temporalio/client';
import { ConfigError } from '../config-error.js';

/** What a connection (client or worker) is opened with. */
export interface TemporalConnectOptions {
  address: string;
  apiKey?: string;
  tls?: TLSConfig | boolean;
  metadata?: Record<string, string>;
}

export interface TemporalSettings {
  /** Unset: no Temporal configured (`npm start` runs its dev server). */
  address: string | undefined;
  namespace: string;
  /** The connection's options; secrets included (never log them). */
  connect: TemporalConnectOptions;
  /** Files the settings were read from (the TOML file, certificate and key files): watched for rotation. */
  files: string[];
  /** A digest of the TLS material (certificate, key, CA, server name): it changes when a certificate is rotated. */
  tlsDigest: string;
}

const BOOLEAN_VALUES = ['true', '1', 'false', '0'];

/** The environment variables envconfig reads (the rest of the environment is not kept). */
const ENVCONFIG_VARIABLE = /^(TEMPORAL_|HOME$|XDG_CONFIG_HOME$|APPDATA$)/;

/** Where envconfig finds the user's profile file (when TEMPORAL_CONFIG_FILE is unset). */
const USER_CONFIG_DIR_VARIABLE = /^(HOME|XDG_CONFIG_HOME|APPDATA)$/;

/**
 * The variables envconfig is given. `userProfile: false` leaves out where the user's profile file is,
 * unless TEMPORAL_PROFILE names a profile: then only TEMPORAL_CONFIG_FILE and the variables count.
 */
export function temporalEnv(env: NodeJS.ProcessEnv, opts: { userProfile: boolean } = { userProfile: true }): Record<string, string> {
  const kept: Record<string, string> = {};
  const userFile = opts.userProfile || Boolean(env['TEMPORAL_PROFILE']);
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || v === '' || !ENVCONFIG_VARIABLE.test(k)) continue;
    if (!userFile && USER_CONFIG_DIR_VARIABLE.test(k)) continue;
    kept[k] = v;
  }
  return kept;
}

const sourcePath = (s: ConfigDataSource | undefined): string | undefined => (s && 'path' in s ? s.path : undefined);

/** The TOML file envconfig reads, when one exists (TEMPORAL_CONFIG_FILE, else the user's default). */
function configFile(env: Record<string, string>): string | undefined {
  if (env['TEMPORAL_CONFIG_FILE']) return env['TEMPORAL_CONFIG_FILE'];
  const base = env['XDG_CONFIG_HOME'] ?? (env['HOME'] ? path.join(env['HOME'], '.config') : undefined);
  if (!base || os.platform() === 'win32' || os.platform() === 'darwin') return undefined;
  const file = path.join(base, 'temporalio', 'temporal.toml');
  return fs.existsSync(file) ? file : undefined;
}

/** The message of an envconfig error, with any file path it names kept and no file content. */
function profileError(err: unknown, env: Record<string, string>): ConfigError {
  const e = err as NodeJS.ErrnoException;
  if (e.code && e.path)
    return new ConfigError(
      `cannot read the Temporal client configuration file ${e.path} (${e.code}); check TEMPORAL_CONFIG_FILE and the TEMPORAL_TLS_*_PATH variables`,
    );
  const profile = env['TEMPORAL_PROFILE'];
  if (profile && /not found/.test(e.message)) {
    return new ConfigError(
      `Temporal profile "${profile}" (TEMPORAL_PROFILE) is not in ` +
        `${configFile(env) ?? 'the Temporal configuration file'}; set TEMPORAL_PROFILE to one of its ` +
        `[profile.*] names or unset it`,
    );
  }
  const line = (e.message ?? String(err)).split('\n')[0]!.slice(0, 200);
  return new ConfigError(`invalid Temporal client configuration${configFile(env) ? ` in ${configFile(env)}` : ''}: ${line}`);
}

/**
 * Reads Temporal's client configuration from `env` (and the files it names). Throws a ConfigError
 * naming the variable or file at fault; never includes a key or certificate in its message.
 */
export function loadTemporalSettings(env: Record<string, string>): TemporalSettings {
  // envconfig reads any value but "true" and "1" as false (TEMPORAL_TLS=TRUE would send an API key in
  // plaintext), where Temporal's CLI reads some as true: only the values both read alike are taken.
  for (const name of ['TEMPORAL_TLS', 'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION']) {
    const value = env[name];
    if (value !== undefined && !BOOLEAN_VALUES.includes(value))
      throw new ConfigError(`${name} must be true, 1, false or 0 (it is "${value.slice(0, 40)}")`);
  }
  let profile: ClientConfigProfile;
  try {
    profile = loadClientConfigProfile({ overrideEnvVars: env });
  } catch (err) {
    throw profileError(err, env);
  }
  if (env['TEMPORAL_TLS_DISABLE_HOST_VERIFICATION'] === 'true' || env['TEMPORAL_TLS_DISABLE_HOST_VERIFICATION'] === '1') {
    // Temporal's TypeScript SDK has no such switch: refused rather than silently verifying anyway.
    throw new ConfigError(
      "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION is not supported by this service's Temporal SDK; set " +
        "TEMPORAL_TLS_SERVER_NAME to a name in the server's certificate instead",
    );
  }
  const tls = profile.tls;
  const certPath = sourcePath(tls?.clientCert);
  const keyPath = sourcePath(tls?.clientKey);
  if (Boolean(tls?.clientCert) !== Boolean(tls?.clientKey)) {
    throw new ConfigError(
      tls?.clientCert
        ? 'a Temporal client certificate is set without its key; set TEMPORAL_TLS_CLIENT_KEY_PATH (or _DATA) too'
        : 'a Temporal client key is set without its certificate; set TEMPORAL_TLS_CLIENT_CERT_PATH (or _DATA) too',
    );
  }
  let options: ReturnType<typeof toClientOptions>;
  try {
    options = toClientOptions(profile);
  } catch (err) {
    throw profileError(err, env);
  }
  const c = options.connectionOptions;
  const tlsOption = c.tls === null || c.tls === undefined ? undefined : c.tls;
  const digest = crypto.createHash('sha256');
  if (tlsOption && typeof tlsOption === 'object') {
    for (const part of [tlsOption.clientCertPair?.crt, tlsOption.clientCertPair?.key, tlsOption.serverRootCACertificate]) {
      digest.update(part ?? new Uint8Array()).update('\0');
    }
    digest.update(tlsOption.serverNameOverride ?? '');
  } else {
    digest.update(String(tlsOption));
  }
  const file = configFile(env);
  return {
    address: profile.address,
    namespace: profile.namespace ?? 'default',
    connect: {
      address: profile.address ?? '',
      ...(profile.apiKey !== undefined ? { apiKey: profile.apiKey } : {}),
      ...(tlsOption !== undefined ? { tls: tlsOption } : {}),
      ...(profile.grpcMeta ? { metadata: profile.grpcMeta } : {}),
    },
    files: [file, certPath, keyPath, sourcePath(tls?.serverCACert)].filter((f): f is string => typeof f === 'string'),
    tlsDigest: digest.digest('hex'),
  };
}

/**
 * The options to reach `address`: the configured connection when it is the configured address, else
 * a plain connection (the dev server `npm start` runs when no Temporal is configured).
 */
export function temporalConnectOptions(
  config: { temporal: { address: string | undefined; connection: TemporalSettings } },
  address: string,
): TemporalConnectOptions {
  return address === config.temporal.address ? config.temporal.connection.connect : { address };
}

/** How the connection is secured, for a log line or a message: never a secret. */
export function describeSecurity(c: TemporalConnectOptions): string {
  const tls = c.tls;
  const parts: string[] = [];
  if (!tls) parts.push('plaintext');
  else if (tls === true) parts.push('TLS');
  else parts.push(tls.clientCertPair ? 'mTLS (client certificate)' : 'TLS');
  if (c.apiKey) parts.push('API key');
  return parts.join(' + ');
}
