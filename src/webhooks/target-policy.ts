// Where webhooks may be sent (SSRF protection). At registration, the URL must match one pattern
// (WEBHOOK_URL_PATTERN, also what the OpenAPI document states, so the two agree exactly): an https URL
// naming its host by a DNS name (never an IP address), without credentials or fragment; in development
// also a loopback URL (localhost, 127.x.x.x, [::1]) over http or https. At every delivery attempt the
// name is resolved and every address checked, and the sender connects to the very address checked (see
// ./sender.ts), so a name that resolves elsewhere a moment later (DNS rebinding) changes nothing; a name
// resolving to a private address is refused there (the deliveries list says why).
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

export const WEBHOOK_URL_CHARS_MAX = 2048;
const DNS_TIMEOUT_MS = 5_000;

/**
 * DNS queries of c-ares (dns.Resolver), never getaddrinfo (dns.lookup): getaddrinfo runs on libuv's
 * thread pool, four threads that file system and crypto work share, so a few slow lookups (an
 * unreachable DNS server, a name that never answers) would stall every other activity of the worker.
 * `localhost` and `*.localhost` are loopback by definition (RFC 6761) and never asked.
 */
const dnsResolver = new dns.promises.Resolver({ timeout: DNS_TIMEOUT_MS, tries: 1 });
const NO_ANSWER = new Set(['ENOTFOUND', 'ENODATA', 'NXDOMAIN', 'ENONAME']);

export const systemResolver: Resolver = async (hostname) => {
  const name = hostname.toLowerCase();
  if (name === 'localhost' || name.endsWith('.localhost')) return [{ address: '127.0.0.1', family: 4 }];
  const [v4, v6] = await Promise.allSettled([dnsResolver.resolve4(name), dnsResolver.resolve6(name)]);
  const found: ResolvedAddress[] = [
    ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
    ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 as const })) : []),
  ];
  if (found.length > 0) return found;
  // No address: say whether the name does not exist, or DNS could not be asked.
  const failure = [v4, v6]
    .map((r) => (r.status === 'rejected' ? (r.reason as NodeJS.ErrnoException) : null))
    .find((e) => e && !NO_ANSWER.has(e.code ?? ''));
  throw failure ?? Object.assign(new Error(`${name} has no address`), { code: 'ENOTFOUND' });
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

const OCTET = '(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])';
// A DNS label; not an IDNA "xn--" label (those must be valid punycode, which a pattern cannot check).
const LABEL = '(?![Xx][Nn]--)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
// The last label starts with a letter: a name is never an IPv4 address.
const TLD = '(?![Xx][Nn]--)[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const NAME = `(?:${LABEL}\\.)*${TLD}`;
const LOOPBACK = `(?:localhost|127\\.${OCTET}\\.${OCTET}\\.${OCTET}|\\[::1\\])`;
const PORT = '(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?';
// Path and query: no white space or control characters, no fragment.
const REST = '(?:/[^\\x00-\\x20\\x7f#?]*)?(?:\\?[^\\x00-\\x20\\x7f#]*)?';

/** The URLs registration accepts (ECMAScript regular expression; JSON Schema's `pattern`). */
export function webhookUrlPattern(policy: TargetPolicy): string {
  const hosts = policy.production
    ? `https://(?![Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt](?:[:/?]|$))${NAME}`
    : `(?:https://(?:${NAME}|${LOOPBACK})|http://${LOOPBACK})`;
  return `^${hosts}${PORT}${REST}$`;
}

/**
 * Checks what can be checked without DNS (the pattern above); the name is resolved and checked at every
 * delivery attempt (resolveWebhookTarget).
 */
export function parseWebhookUrl(raw: string, policy: TargetPolicy): URL {
  if (raw.length > WEBHOOK_URL_CHARS_MAX)
    throw new WebhookTargetError('invalid_url', `url must be at most ${WEBHOOK_URL_CHARS_MAX} characters`);
  if (!new RegExp(webhookUrlPattern(policy)).test(raw)) {
    throw new WebhookTargetError(
      'url_not_allowed',
      `url must be an https URL naming its host by a DNS name (not an IP address), without credentials or ` +
        `fragment${policy.production ? '' : ', or a loopback URL (localhost, 127.x.x.x, [::1]) over http or https'}`,
    );
  }
  return new URL(raw);
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
      if (code === 'ENOTFOUND' || code === 'ENODATA')
        throw new WebhookTargetError('url_unresolvable', `the host of url (${host}) does not resolve`);
      throw new WebhookTargetError('dns_unavailable', `the host of url (${host}) could not be resolved now (${code ?? 'error'})`);
    }
    if (addresses.length === 0) throw new WebhookTargetError('url_unresolvable', `the host of url (${host}) does not resolve`);
  }
  for (const a of addresses) {
    if (!addressAllowed(addressKind(a.address), url.protocol, policy)) {
      // The address is not named: the message is stored and listed with the delivery, and naming what an
      // internal name resolves to would make the deliveries list a DNS oracle of the operator's network.
      throw new WebhookTargetError(
        'url_not_allowed',
        `the host of url resolves to an address that is not a permitted target; ${describe(policy)}`,
      );
    }
  }
  return addresses[0]!;
}
