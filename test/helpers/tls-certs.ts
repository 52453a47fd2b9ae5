// A test certificate authority and its leaf certificates (servers, clients), made with openssl in a
// directory of their own: for the TLS tests of PostgreSQL and Temporal (mTLS, a wrong host name, an
// unknown CA, an expired certificate).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface CertPair {
  /** PEM file paths. */
  certPath: string;
  keyPath: string;
  cert: string;
  key: string;
}

export interface TestCa {
  dir: string;
  /** The CA certificate (PEM): what a peer trusts. */
  certPath: string;
  cert: string;
  keyPath: string;
  /** A server certificate for these DNS names / IP addresses (default: localhost and 127.0.0.1). */
  server(name: string, opts?: LeafOptions): CertPair;
  /** A client certificate (extendedKeyUsage clientAuth) with this common name. */
  client(name: string, opts?: LeafOptions): CertPair;
}

export interface LeafOptions {
  /** subjectAltName entries, e.g. ['DNS:localhost', 'IP:127.0.0.1']. */
  altNames?: string[];
  /** Validity in days; a negative number makes a certificate that has already expired. */
  days?: number;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** ASN.1 GeneralizedTime for openssl ca's -startdate/-enddate: YYYYMMDDHHMMSSZ. */
const asn1Time = (d: Date) =>
  d
    .toISOString()
    .replace(/[-:T]/g, '')
    .replace(/\.\d+Z$/, 'Z');

/** A new CA (EC P-256 keys, ten years) in `dir` (made if needed); `name` is its common name. */
export function createTestCa(dir: string, name = 'video-api test CA'): TestCa {
  fs.mkdirSync(dir, { recursive: true });
  const caKey = path.join(dir, 'ca.key');
  const caCert = path.join(dir, 'ca.crt');
  openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', caKey], dir);
  openssl(
    [
      'req',
      '-x509',
      '-new',
      '-key',
      caKey,
      '-sha256',
      '-days',
      '3650',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
      '-out',
      caCert,
    ],
    dir,
  );
  let serial = 1;

  const leaf = (cn: string, usage: 'serverAuth' | 'clientAuth', opts: LeafOptions): CertPair => {
    const base = path.join(dir, `${cn.replace(/[^A-Za-z0-9.-]/g, '_')}-${serial}`);
    const keyPath = `${base}.key`;
    const csr = `${base}.csr`;
    const certPath = `${base}.crt`;
    const ext = `${base}.ext`;
    const alt = opts.altNames ?? (usage === 'serverAuth' ? ['DNS:localhost', 'IP:127.0.0.1'] : []);
    fs.writeFileSync(
      ext,
      [
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment',
        `extendedKeyUsage=${usage}`,
        ...(alt.length ? [`subjectAltName=${alt.join(',')}`] : []),
      ].join('\n') + '\n',
    );
    openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', keyPath], dir);
    // PKCS#8: what every TLS stack here reads (PostgreSQL, Go, rustls, Node).
    openssl(['pkcs8', '-topk8', '-nocrypt', '-in', keyPath, '-out', `${keyPath}.p8`], dir);
    fs.renameSync(`${keyPath}.p8`, keyPath);
    openssl(['req', '-new', '-key', keyPath, '-subj', `/CN=${cn}`, '-out', csr], dir);
    const days = opts.days ?? 365;
    if (days > 0) {
      openssl(
        [
          'x509',
          '-req',
          '-in',
          csr,
          '-CA',
          caCert,
          '-CAkey',
          caKey,
          '-set_serial',
          String(serial++),
          '-days',
          String(days),
          '-sha256',
          '-extfile',
          ext,
          '-out',
          certPath,
        ],
        dir,
      );
    } else {
      // Already expired: valid from two days before its end, which lies `-days` days in the past.
      const end = new Date(Date.now() + (days - 1) * 86_400_000);
      const start = new Date(end.getTime() - 2 * 86_400_000);
      const caDir = `${base}.ca`;
      fs.mkdirSync(caDir, { recursive: true });
      fs.writeFileSync(path.join(caDir, 'index.txt'), '');
      fs.writeFileSync(path.join(caDir, 'serial'), `${(serial++).toString(16).padStart(2, '0')}\n`);
      const conf = path.join(caDir, 'ca.cnf');
      fs.writeFileSync(
        conf,
        [
          '[ca]',
          'default_ca = test',
          '[test]',
          `dir = ${caDir}`,
          `database = ${path.join(caDir, 'index.txt')}`,
          `serial = ${path.join(caDir, 'serial')}`,
          `new_certs_dir = ${caDir}`,
          'default_md = sha256',
          'policy = any',
          'unique_subject = no',
          'copy_extensions = none',
          '[any]',
          'commonName = supplied',
        ].join('\n') + '\n',
      );
      openssl(
        [
          'ca',
          '-batch',
          '-config',
          conf,
          '-cert',
          caCert,
          '-keyfile',
          caKey,
          '-in',
          csr,
          '-out',
          certPath,
          '-notext',
          '-extfile',
          ext,
          '-startdate',
          asn1Time(start),
          '-enddate',
          asn1Time(end),
        ],
        dir,
      );
    }
    fs.chmodSync(keyPath, 0o600);
    return { certPath, keyPath, cert: fs.readFileSync(certPath, 'utf8'), key: fs.readFileSync(keyPath, 'utf8') };
  };

  return {
    dir,
    certPath: caCert,
    cert: fs.readFileSync(caCert, 'utf8'),
    keyPath: caKey,
    server: (name, opts = {}) => leaf(name, 'serverAuth', opts),
    client: (name, opts = {}) => leaf(name, 'clientAuth', opts),
  };
}
