// Secrets of the processes: ADMIN_TOKEN and URL_SIGNING_SECRET from the environment, or in development
// generated once and kept in DATA_DIR/secrets.json.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { ConfigError, type Config } from '../config.js';

export interface Secrets {
  adminToken: string;
  urlSigningSecret: string;
  /** The admin token was generated (development) rather than given. */
  adminTokenGenerated: boolean;
}

/**
 * ADMIN_TOKEN and URL_SIGNING_SECRET from the environment; in development, generated once and kept
 * in DATA_DIR/secrets.json (mode 0600) so they survive restarts and the admin CLI can read them.
 */
export function loadSecrets(config: Config): Secrets {
  if (config.adminToken && config.urlSigningSecret) {
    return { adminToken: config.adminToken, urlSigningSecret: config.urlSigningSecret, adminTokenGenerated: false };
  }
  if (config.production) throw new ConfigError('ADMIN_TOKEN and URL_SIGNING_SECRET must be set when NODE_ENV=production');
  const file = path.join(config.dataDir, 'secrets.json');
  let stored: { admin_token?: string; url_signing_secret?: string } = {};
  if (fs.existsSync(file)) stored = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (!stored.admin_token || !stored.url_signing_secret) {
    stored = {
      admin_token: stored.admin_token ?? `adm_${randomBytes(24).toString('base64url')}`,
      url_signing_secret: stored.url_signing_secret ?? randomBytes(32).toString('base64url'),
    };
    fs.mkdirSync(config.dataDir, { recursive: true });
    fs.writeFileSync(file, JSON.stringify(stored, null, 2), { mode: 0o600 });
  }
  return {
    adminToken: config.adminToken ?? stored.admin_token!,
    urlSigningSecret: config.urlSigningSecret ?? stored.url_signing_secret!,
    adminTokenGenerated: !config.adminToken,
  };
}
