// Where webhooks may be sent (SSRF protection), checked at registration and again at every delivery
// attempt after DNS resolution. The sender then connects to the very address checked here (see
// ./sender.ts), so a name that resolves elsewhere a moment later (DNS rebinding) changes nothing.
//
//   production (NODE_ENV=production): https only, and every address the host resolves to is public
//   development: also loopback (http or https), so a receiver on this machine can be tried out
//
// "Public" is deny-by-default: an IPv4 address ipaddr.js classifies as plain `unicast`, or an IPv6
// global unicast address (2000::/3) it classifies as `unicast`. Private, loopback, link-local,
// unique-local, CGNAT, multicast, unspecified, broadcast, reserved, documentation and benchmarking
// ranges, and IPv6 forms that embed an IPv4 address (6to4, Teredo, NAT64), are refused; an
// IPv4-mapped IPv6 address is judged as the IPv4 address it maps.
import dns from 'node:dns';
import ipaddr from 'ipaddr.js';

export interface TargetPolicy {
  production: boolean;
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Every address a host name resolves to (a fake in tests). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const WEBHOOK_URL_MAX_CHARS = 2048;
const DNS_TIMEOUT_MS = 5_000;

export const systemResolver: Resolver = async (hostname) => {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`DNS lookup of ${hostname} timed out`), { code: 'ETIMEOUT' })), DNS_TIMEOUT_MS);
  });
  try {
    const found = await Promise.race([dns.promises.lookup(hostname, { all: true, verbatim: true }), timeout]);
    return found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
  } finally {
    clearTimeout(timer);
  }
};

export type TargetErrorCode = 'invalid_url' | 'url_not_allowed' | 'url_unresolvable' | 'dns_unavailable';

export class WebhookTargetError extends Error {
  constructor(
    readonly code: TargetErrorCode,
    message: string,
  ) {
    super(message);
  }
}

const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');

type Kind = 'public' | 'loopback' | 'other';

/** What kind of address `ip` is; anything unparseable is `other`. */
export function addressKind(ip: string): Kind {
  if (!ipaddr.isValid(ip)) return 'other';
  let addr = ipaddr.parse(ip);
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) addr = (addr as ipaddr.IPv6).toIPv4Address();
  const range = addr.range();
  if (range === 'loopback') return 'loopback';
  if (range !== 'unicast') return 'other';
  if (addr.kind() === 'ipv6' && !(addr as ipaddr.IPv6).match(GLOBAL_UNICAST_V6)) return 'other';
  return 'public';
}

function addressAllowed(kind: Kind, protocol: string, policy: TargetPolicy): boolean {
  if (kind === 'public') return protocol === 'https:';
  return kind === 'loopback' && !policy.production;
}

const describe = (policy: TargetPolicy) =>
  policy.production ? 'only public https URLs are allowed' : 'only public https URLs, or loopback URLs in development, are allowed';

/** Checks what can be checked without DNS: a URL of an allowed scheme, without credentials. */
export function parseWebhookUrl(raw: string, policy: TargetPolicy): URL {
  if (raw.length > WEBHOOK_URL_MAX_CHARS) throw new WebhookTargetError('invalid_url', `url must be at most ${WEBHOOK_URL_MAX_CHARS} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookTargetError('invalid_url', 'url must be an absolute http(s) URL');
  }
  const allowedProtocols = policy.production ? ['https:'] : ['https:', 'http:'];
  if (!allowedProtocols.includes(url.protocol)) throw new WebhookTargetError('url_not_allowed', `url must use https; ${describe(policy)}`);
  if (url.username || url.password) throw new WebhookTargetError('invalid_url', 'url must not contain credentials');
  if (url.hash) throw new WebhookTargetError('invalid_url', 'url must not contain a fragment');
  if (!url.hostname) throw new WebhookTargetError('invalid_url', 'url must name a host');
  return url;
}

/** The host of a URL as a resolver or socket takes it: an IPv6 literal without its brackets. */
export const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1');

/**
 * Resolves the URL's host and checks every address it resolves to; answers the one to connect to.
 * A host with any refused address is refused: a name pointing partly inside is not a public target.
 */
export async function resolveWebhookTarget(url: URL, policy: TargetPolicy, resolver: Resolver): Promise<ResolvedAddress> {
  const host = hostOf(url);
  let addresses: ResolvedAddress[];
  if (ipaddr.isValid(host)) {
    addresses = [{ address: host, family: ipaddr.parse(host).kind() === 'ipv6' ? 6 : 4 }];
  } else {
    try {
      addresses = await resolver(host);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOTFOUND' || code === 'ENODATA') throw new WebhookTargetError('url_unresolvable', `the host of url (${host}) does not resolve`);
      throw new WebhookTargetError('dns_unavailable', `the host of url (${host}) could not be resolved now (${code ?? 'error'})`);
    }
    if (addresses.length === 0) throw new WebhookTargetError('url_unresolvable', `the host of url (${host}) does not resolve`);
  }
  for (const a of addresses) {
    if (!addressAllowed(addressKind(a.address), url.protocol, policy)) {
      throw new WebhookTargetError('url_not_allowed', `url resolves to ${a.address}, which is not a permitted target; ${describe(policy)}`);
    }
  }
  return addresses[0]!;
}
