// The process's PostgreSQL pool: reachable (else one line at startup) and migrated. DATABASE_URL takes
// libpq's TLS parameters as node-postgres reads them: `sslmode=verify-full` verifies the server's
// certificate and that it names the URL's host, against the CA in `sslrootcert=<file>` (or the system's
// CAs without it, or with libpq's `sslrootcert=system`); `sslcert` / `sslkey` give a client certificate.
import { ConfigError, type Config } from '../config.js';
import { createPool, type Db } from '../db/pool.js';
import { migrate } from '../db/migrate.js';
import { registerDatabaseGauges } from '../metrics.js';

/**
 * Opens the pool and migrates. With `gauges` (the API's processes), the pending-work gauges read from
 * PostgreSQL are served by this process's /metrics; a worker-only process leaves them to the API's, so
 * its scrapes cost no queries.
 */
export async function openDatabase(url: string, config: Config, opts: { gauges: boolean } = { gauges: true }): Promise<Db> {
  const connectionString = withSystemRootCert(url);
  let db: Db;
  try {
    db = createPool(connectionString, config.databasePoolMax, { 'video_api.max_pending_jobs': config.pendingJobsPerWorkspaceMax });
  } catch (err) {
    throw new ConfigError(`cannot use DATABASE_URL ${redactUrl(url)}: ${databaseFailure(err)}`);
  }
  try {
    await db.query('SELECT 1');
  } catch (err) {
    await db.end().catch(() => {});
    throw new ConfigError(`cannot reach PostgreSQL at ${redactUrl(url)}: ${databaseFailure(err)}`);
  }
  await migrate(db);
  if (opts.gauges) registerDatabaseGauges(db);
  return db;
}

/**
 * libpq's `sslrootcert=system` (trust the system's CAs) is, for node-postgres, no sslrootcert at all
 * (it would read a file named "system"); verification stays on (sslmode).
 */
function withSystemRootCert(url: string): string {
  try {
    const u = new URL(url);
    if (u.searchParams.get('sslrootcert') !== 'system') return url;
    u.searchParams.delete('sslrootcert');
    return u.toString();
  } catch {
    return url;
  }
}

/** Why a connection failed, with the fix when it is a TLS refusal; one line, no secret. */
function databaseFailure(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  const code = e.code ?? '';
  const message = (e.message ?? String(err)).split('\n')[0]!;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return (
      `its certificate does not name the host in DATABASE_URL ` +
      `(${message.replace(/^Hostname\/IP does not match certificate's altnames: /, '')}); connect by a name ` +
      `in the certificate`
    );
  }
  if (code === 'CERT_HAS_EXPIRED') return "its certificate has expired; renew the server's certificate";
  if (/SELF_SIGNED|UNABLE_TO_GET_ISSUER|UNABLE_TO_VERIFY_LEAF|CERT_UNTRUSTED|CERT_SIGNATURE_FAILURE/.test(code)) {
    return `its certificate is signed by a CA not trusted here (${code}); set sslrootcert=<CA file> in DATABASE_URL`;
  }
  if (/does not support SSL/i.test(message))
    return 'the server does not accept TLS; enable ssl on the server, or remove sslmode from DATABASE_URL';
  if (/no pg_hba\.conf entry .*no encryption/i.test(message))
    return `${message}; the server requires TLS: add sslmode=verify-full (and sslrootcert=<CA file>) to DATABASE_URL`;
  if (code === 'ENOENT' && e.path) return `cannot read ${e.path} (no such file); check sslrootcert, sslcert and sslkey in DATABASE_URL`;
  return message;
}

/** DATABASE_URL parameters that carry a secret (node-postgres takes any parameter as a setting). */
const SECRET_PARAMETERS = new Set(['password', 'sslpassword']);

export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const name of [...u.searchParams.keys()]) if (SECRET_PARAMETERS.has(name.toLowerCase())) u.searchParams.set(name, '***');
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}
