// A Temporal that refuses this process at startup: one line saying which refusal and how to fix it
// (a ConfigError: no stack trace, non-zero exit). gRPC's own errors say little about a TLS failure
// ("failed to connect before the deadline"), so a failed connection is diagnosed with a TLS handshake
// of our own, made with the same certificate, key, CA and server name.
import { X509Certificate } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { ConfigError } from '../config-error.js';
import type { TemporalConnectOptions } from './connection-config.js';

/** gRPC status codes (https://grpc.github.io/grpc/core/md_doc_statuscodes.html). */
export const GRPC = {
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  UNIMPLEMENTED: 12,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

const PROBE_TIMEOUT_MS = 5_000;

/**
 * What kind of failure kept a connection or check from succeeding: `refused` (credentials or client
 * certificate refused), `unreachable` (no TCP connection), `timeout` (no answer in time), `unavailable`
 * (gRPC UNAVAILABLE), `tls_failed` (another TLS failure: the server's certificate, a key that cannot be
 * used), `not_grpc` (something that does not speak gRPC as configured), `namespace_not_found`, `failed`.
 */
export type TemporalFailureKind =
  'refused' | 'unreachable' | 'timeout' | 'unavailable' | 'tls_failed' | 'not_grpc' | 'namespace_not_found' | 'failed';

/** A diagnosed failure to reach or use Temporal: the one line for the operator, and its kind. */
export class TemporalConnectError extends ConfigError {
  constructor(
    message: string,
    readonly kind: TemporalFailureKind,
  ) {
    super(message);
  }
}

/** The kind of a failure (a diagnosed one's own; else read from its gRPC status). */
export function temporalFailureKind(err: unknown): TemporalFailureKind {
  if (err instanceof TemporalConnectError) return err.kind;
  const g = grpcCode(err);
  if (g?.code === GRPC.UNAUTHENTICATED || g?.code === GRPC.PERMISSION_DENIED) return 'refused';
  if (g?.code === GRPC.DEADLINE_EXCEEDED) return 'timeout';
  if (g?.code === GRPC.UNAVAILABLE) return 'unavailable';
  if (g?.code === GRPC.NOT_FOUND) return 'namespace_not_found';
  return 'failed';
}

/** The kind of a failed TLS handshake of our own (probeTls's answer). */
const tlsProbeKind = (why: string): TemporalFailureKind =>
  /^cannot reach /.test(why)
    ? 'unreachable'
    : /refused the client certificate|requires a client certificate|does not trust the client certificate|client certificate expired/.test(
          why,
        )
      ? 'refused'
      : /did not answer TLS/.test(why)
        ? 'not_grpc'
        : 'tls_failed';

function hostPort(address: string): { host: string; port: number } {
  const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(address);
  return m ? { host: m[1]!, port: Number(m[2]) } : { host: address, port: 7233 };
}

const CERT_FIX = 'set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH to a certificate signed by a CA the server trusts';

/** Why a TLS handshake with the server fails, in words with the fix; null when it succeeds. */
async function probeTls(opts: TemporalConnectOptions): Promise<string | null> {
  const { host, port } = hostPort(opts.address);
  const t = typeof opts.tls === 'object' ? opts.tls : {};
  const buf = (b: Uint8Array | undefined) => (b ? Buffer.from(b) : undefined);
  return new Promise((resolve) => {
    const socket = tls.connect({
      host,
      port,
      servername: t.serverNameOverride ?? (net.isIP(host) ? undefined : host),
      ...(t.serverRootCACertificate ? { ca: buf(t.serverRootCACertificate) } : {}),
      ...(t.clientCertPair ? { cert: buf(t.clientCertPair.crt), key: buf(t.clientCertPair.key) } : {}),
      ALPNProtocols: ['h2'],
      ...(t.serverNameOverride
        ? { checkServerIdentity: (_h: string, cert: tls.PeerCertificate) => tls.checkServerIdentity(t.serverNameOverride!, cert) }
        : {}),
    });
    const done = (why: string | null) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(why);
    };
    const timer = setTimeout(() => done(null), PROBE_TIMEOUT_MS);
    // TLS 1.3: the server judges the client certificate after the client's side of the handshake, so
    // its refusal arrives as an alert on the first read: send the HTTP/2 preface and wait for a reply.
    socket.once('secureConnect', () => socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00'));
    socket.once('data', () => done(null));
    socket.once('end', () =>
      done(
        t.clientCertPair
          ? `the Temporal server at ${opts.address} closed the connection after the TLS handshake: it refused the ` +
              `client certificate (not signed by a CA it trusts, or revoked): ${CERT_FIX}`
          : `the Temporal server at ${opts.address} requires a client certificate (mTLS): ${CERT_FIX}`,
      ),
    );
    socket.once('error', (err: NodeJS.ErrnoException) => done(tlsFailure(err, opts)));
  });
}

function tlsFailure(err: NodeJS.ErrnoException, opts: TemporalConnectOptions): string {
  const code = err.code ?? '';
  const at = `the Temporal server at ${opts.address}`;
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EHOSTUNREACH' || code === 'ETIMEDOUT') {
    return `cannot reach ${at} (${code}); check TEMPORAL_ADDRESS`;
  }
  if (/CERTIFICATE_REQUIRED/.test(code)) return `${at} requires a client certificate (mTLS): ${CERT_FIX}`;
  if (/ALERT_UNKNOWN_CA/.test(code)) return `${at} does not trust the client certificate's CA: ${CERT_FIX}`;
  if (/ALERT_CERTIFICATE_EXPIRED/.test(code))
    return `${at} refused the client certificate as expired: renew it (TEMPORAL_TLS_CLIENT_CERT_PATH)`;
  if (/ALERT_BAD_CERTIFICATE|ALERT_CERTIFICATE_REVOKED|ALERT_UNSUPPORTED_CERTIFICATE|ALERT_ACCESS_DENIED/.test(code)) {
    return `${at} refused the client certificate (${code}): ${CERT_FIX}`;
  }
  if (code === 'CERT_HAS_EXPIRED') return `${at} presents an expired certificate; renew the server's certificate`;
  if (code === 'CERT_NOT_YET_VALID') return `${at} presents a certificate that is not valid yet; check the clocks`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return (
      `${at} presents a certificate for another name ` +
      `(${err.message.replace(/^Hostname\/IP does not match certificate's altnames: /, '')}); set ` +
      `TEMPORAL_TLS_SERVER_NAME to the name in its certificate`
    );
  }
  if (/SELF_SIGNED|UNABLE_TO_GET_ISSUER|UNABLE_TO_VERIFY_LEAF|CERT_UNTRUSTED|CERT_SIGNATURE_FAILURE/.test(code)) {
    return `${at} presents a certificate signed by an unknown CA (${code}); set TEMPORAL_TLS_SERVER_CA_CERT_PATH to its CA certificate`;
  }
  if (/WRONG_VERSION_NUMBER|PACKET_LENGTH_TOO_LONG|UNKNOWN_PROTOCOL/.test(code) || code === 'ECONNRESET') {
    return `${at} did not answer TLS (${code}); if it serves plaintext, unset TEMPORAL_TLS and TEMPORAL_API_KEY or set TEMPORAL_TLS=false`;
  }
  if (/KEY_VALUES_MISMATCH|BAD_DECRYPT|NO_START_LINE|PEM/.test(code) || /key|certificate/i.test(err.message)) {
    return (
      `the Temporal client certificate or key cannot be used (${code || err.message.split('\n')[0]}); check ` +
      `TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH`
    );
  }
  return `TLS with ${at} failed (${code || err.message.split('\n')[0]})`;
}

/** Says so when the client certificate is outside its validity period (a server refuses it then). */
function expiredClientCertificate(opts: TemporalConnectOptions): string | null {
  const pair = typeof opts.tls === 'object' ? opts.tls.clientCertPair : undefined;
  if (!pair) return null;
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(Buffer.from(pair.crt));
  } catch {
    return 'the Temporal client certificate is not a PEM certificate; check TEMPORAL_TLS_CLIENT_CERT_PATH (or _DATA)';
  }
  const now = Date.now();
  if (Date.parse(cert.validTo) < now)
    return (
      `the Temporal client certificate expired on ${new Date(cert.validTo).toISOString()}; the server ` +
      `refuses it: renew it (TEMPORAL_TLS_CLIENT_CERT_PATH)`
    );
  if (Date.parse(cert.validFrom) > now)
    return (
      `the Temporal client certificate is valid only from ${new Date(cert.validFrom).toISOString()}; check ` +
      `the clocks or the certificate (TEMPORAL_TLS_CLIENT_CERT_PATH)`
    );
  return null;
}

/** Whether a plain TCP connection to the address opens. */
function reachable(address: string): Promise<string | null> {
  const { host, port } = hostPort(address);
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const timer = setTimeout(() => finish('ETIMEDOUT'), PROBE_TIMEOUT_MS);
    const finish = (code: string | null) => {
      clearTimeout(timer);
      s.destroy();
      resolve(code);
    };
    s.once('connect', () => finish(null));
    s.once('error', (err: NodeJS.ErrnoException) => finish(err.code ?? 'error'));
  });
}

/**
 * The gRPC status of an error: its `code` (the client's errors), or for the worker's native connection,
 * whose errors are text ("code: 'The request does not have valid authentication credentials', message: ..."),
 * the code that text describes.
 */
export function grpcCode(err: unknown): { code: number; details: string } | null {
  for (let e = err as { code?: unknown; details?: unknown; message?: unknown; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (typeof e.code === 'number') return { code: e.code, details: String(e.details ?? e.message ?? '') };
    const text = typeof e.message === 'string' ? e.message : '';
    const native = /code: '([^']*)', message: "([^"]*)"/.exec(text);
    if (native) {
      const code = NATIVE_CODES.find(([pattern]) => pattern.test(native[1]!))?.[1];
      if (code !== undefined) return { code, details: native[2]! };
    }
  }
  return null;
}

/** The descriptions of gRPC codes in the native connection's (tonic's) errors. */
const NATIVE_CODES: [RegExp, number][] = [
  [/valid authentication credentials/i, GRPC.UNAUTHENTICATED],
  [/permission/i, GRPC.PERMISSION_DENIED],
  [/not found/i, GRPC.NOT_FOUND],
  [/unavailable/i, GRPC.UNAVAILABLE],
  [/not implemented/i, GRPC.UNIMPLEMENTED],
  [/invalid argument/i, GRPC.INVALID_ARGUMENT],
];

/** The line for credentials the server refuses (a gRPC UNAUTHENTICATED or PERMISSION_DENIED); null otherwise. */
export function credentialRefusal(err: unknown, opts: TemporalConnectOptions, namespace?: string): ConfigError | null {
  const g = grpcCode(err);
  if (!g || (g.code !== GRPC.UNAUTHENTICATED && g.code !== GRPC.PERMISSION_DENIED)) return null;
  const what = g.code === GRPC.UNAUTHENTICATED ? 'UNAUTHENTICATED' : 'PERMISSION_DENIED';
  const details = g.details.split('\n')[0]!.slice(0, 160);
  const fix = opts.apiKey
    ? `check TEMPORAL_API_KEY (a valid key${namespace ? ` with access to namespace "${namespace}"` : ''})`
    : `set TEMPORAL_API_KEY or a client certificate${namespace ? ` allowed on namespace "${namespace}"` : ''}`;
  return new TemporalConnectError(
    `the Temporal server at ${opts.address} refused this process's credentials (${what}: ${details}); ${fix}`,
    'refused',
  );
}

/**
 * The ConfigError for a connection that could not be opened: a TLS refusal found by a handshake of
 * our own, refused credentials, or an unreachable or silent server. Anything else is returned as is.
 */
export async function diagnoseConnectFailure(err: unknown, opts: TemporalConnectOptions): Promise<unknown> {
  if (err instanceof ConfigError) return err;
  const refused = credentialRefusal(err, opts);
  if (refused) return refused;
  if (opts.tls) {
    const expired = expiredClientCertificate(opts);
    if (expired) return new TemporalConnectError(expired, 'refused');
    const why = await probeTls(opts);
    if (why) return new TemporalConnectError(why, tlsProbeKind(why));
  } else {
    const code = await reachable(opts.address);
    if (code)
      return new TemporalConnectError(
        `cannot reach the Temporal server at ${opts.address} (${code}); check TEMPORAL_ADDRESS`,
        code === 'ETIMEDOUT' ? 'timeout' : 'unreachable',
      );
    const g = grpcCode(err);
    if (!g || g.code === GRPC.UNAVAILABLE) {
      return new TemporalConnectError(
        `the Temporal server at ${opts.address} does not answer gRPC in plaintext; if it requires TLS, set ` +
          `TEMPORAL_TLS=true (with TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH, or ` +
          `TEMPORAL_API_KEY)`,
        timedOut(err) ? 'timeout' : 'not_grpc',
      );
    }
  }
  const g = grpcCode(err);
  const first = (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 200);
  const kind = temporalFailureKind(err);
  return new TemporalConnectError(
    `cannot connect to the Temporal server at ${opts.address} ` +
      `(${g ? `gRPC status ${g.code}: ${g.details.slice(0, 160)}` : first}); check TEMPORAL_ADDRESS and its ` +
      `TLS settings`,
    kind === 'failed' && timedOut(err) ? 'timeout' : kind,
  );
}

/** Whether an error says a deadline passed (a connection or call that got no answer in time). */
const timedOut = (err: unknown) => /deadline|timed? ?out/i.test(err instanceof Error ? err.message : String(err));

/**
 * The namespace must exist and this process's credentials must be allowed on it: checked once at
 * startup (DescribeNamespace), so a wrong TEMPORAL_NAMESPACE stops the process with one line.
 */
export async function checkNamespace(
  workflowService: { describeNamespace(req: { namespace: string }): Promise<unknown> },
  opts: TemporalConnectOptions,
  namespace: string,
): Promise<void> {
  try {
    await workflowService.describeNamespace({ namespace });
  } catch (err) {
    const refused = credentialRefusal(err, opts, namespace);
    if (refused) throw refused;
    if (grpcCode(err)?.code === GRPC.NOT_FOUND) {
      throw new TemporalConnectError(
        `the Temporal namespace "${namespace}" does not exist at ${opts.address}; set TEMPORAL_NAMESPACE to ` +
          `an existing one, or create it (temporal operator namespace create --namespace ${namespace})`,
        'namespace_not_found',
      );
    }
    throw await diagnoseConnectFailure(err, opts);
  }
}
