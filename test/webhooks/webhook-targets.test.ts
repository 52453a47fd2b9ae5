// SSRF protection of webhooks: which addresses are public; refusals after DNS resolution with a fake
// resolver answering private addresses (nothing is ever connected to); the connection goes to the
// address that was checked, not to a second DNS answer (no rebinding); and registration through the
// API of a production stack (NODE_ENV=production) refuses every non-public or non-https URL.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { addressKind, resolveWebhookTarget, webhookUrlPattern, type Resolver } from '../../src/webhooks/target-policy.js';
import { sendWebhook } from '../../src/webhooks/sender.js';
import { WebhooksService } from '../../src/webhooks/service.js';
import { http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

const production = { production: true };
const development = { production: false };

/** A resolver that answers fixed addresses per host, and counts its calls. */
function fakeResolver(table: Record<string, string[]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (host: string) => {
    calls.push(host);
    const found = table[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: (address.includes(':') ? 6 : 4) as 4 | 6 }));
  };
  return Object.assign(resolve, { calls });
}

const PRIVATE_ADDRESSES = [
  '10.0.0.1', // private
  '172.16.5.4',
  '192.168.1.1',
  '127.0.0.1', // loopback
  '127.1.2.3',
  '169.254.169.254', // link-local (cloud metadata)
  '100.64.0.1', // CGNAT
  '224.0.0.1', // multicast
  '0.0.0.0', // unspecified
  '255.255.255.255', // broadcast
  '192.0.2.10', // documentation
  '198.18.0.1', // benchmarking
  '::1', // loopback
  '::', // unspecified
  'fe80::1', // link-local
  'fc00::1', // unique local
  'fd12:3456::1',
  'ff02::1', // multicast
  '::ffff:10.0.0.1', // IPv4-mapped private
  '::ffff:127.0.0.1', // IPv4-mapped loopback
  '::ffff:169.254.169.254',
  '64:ff9b::a00:1', // NAT64 of 10.0.0.1
  '2002:a00:1::1', // 6to4 of 10.0.0.1
  '2001:db8::1', // documentation
  'fec0::1', // site-local (deprecated)
];
const PUBLIC_ADDRESSES = [
  '93.184.216.34',
  '8.8.8.8',
  '1.1.1.1',
  '2606:2800:220:1:248:1893:25c8:1946',
  '2001:4860:4860::8888',
  '::ffff:93.184.216.34',
];

describe('addresses', () => {
  test('public addresses are public; private, loopback, link-local, unique-local, CGNAT, multicast, unspecified and embedded-IPv4 forms are not', () => {
    for (const a of PUBLIC_ADDRESSES) assert.equal(addressKind(a), 'public', a);
    for (const a of PRIVATE_ADDRESSES) assert.notEqual(addressKind(a), 'public', a);
    for (const a of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1']) assert.equal(addressKind(a), 'loopback', a);
    assert.equal(addressKind('not-an-ip'), 'other');
  });

  test('after DNS resolution: a host resolving to any private address is refused, in production and (but loopback) in development', async () => {
    for (const a of PRIVATE_ADDRESSES) {
      const resolver = fakeResolver({ 'hooks.example.com': ['93.184.216.34', a] });
      await assert.rejects(
        resolveWebhookTarget(new URL('https://hooks.example.com/x'), production, resolver),
        { code: 'url_not_allowed' },
        a,
      );
      if (addressKind(a) !== 'loopback') {
        await assert.rejects(
          resolveWebhookTarget(new URL('https://hooks.example.com/x'), development, resolver),
          { code: 'url_not_allowed' },
          a,
        );
      }
    }
    const resolver = fakeResolver({
      'hooks.example.com': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
      'local.test': ['127.0.0.1'],
    });
    assert.deepEqual(await resolveWebhookTarget(new URL('https://hooks.example.com/x'), production, resolver), {
      address: '93.184.216.34',
      family: 4,
    });
    await assert.rejects(resolveWebhookTarget(new URL('https://local.test/x'), production, resolver), { code: 'url_not_allowed' });
    assert.deepEqual(await resolveWebhookTarget(new URL('http://local.test/x'), development, resolver), {
      address: '127.0.0.1',
      family: 4,
    });
    await assert.rejects(
      resolveWebhookTarget(new URL('http://hooks.example.com/x'), development, resolver),
      { code: 'url_not_allowed' },
      'http only to loopback',
    );
    await assert.rejects(resolveWebhookTarget(new URL('https://nowhere.test/x'), production, resolver), { code: 'url_unresolvable' });
    // IP literals are judged without DNS, in any spelling the URL parser accepts.
    for (const u of [
      'https://127.0.0.1/',
      'https://0x7f.1/',
      'https://2130706433/',
      'https://[::1]/',
      'https://[::ffff:7f00:1]/',
      'https://[::127.0.0.1]/',
      'https://10.1/',
    ]) {
      await assert.rejects(resolveWebhookTarget(new URL(u), production, resolver), { code: 'url_not_allowed' }, u);
    }
    assert.deepEqual(
      resolver.calls.filter((h) => /^[\d.[\]:x]+$/.test(h)),
      [],
      'literals never reach the resolver',
    );
  });
});

describe('delivery attempts', () => {
  let receiver: Receiver;
  before(async () => {
    receiver = await startReceiver();
  });
  after(async () => {
    await receiver.close();
  });
  const headers = { 'webhook-id': 'evt_x', 'webhook-timestamp': '1', 'webhook-signature': 'v1,x' };

  test('a target resolving to a private address is refused before any connection, and the refusal never names the address (no DNS oracle)', async () => {
    const port = new URL(receiver.url).port;
    const before = receiver.received.length;
    for (const policy of [production, development]) {
      for (const address of ['10.0.0.1', '169.254.169.254', 'fd00::1']) {
        const resolver = fakeResolver({ 'hooks.example.com': [address] });
        const r = await sendWebhook({ url: `https://hooks.example.com:${port}/hooks`, headers, body: '{}', policy, resolver });
        assert.equal(r.succeeded, false);
        assert.equal(r.http_status, null);
        assert.match(r.error!, /^refused: the host of url resolves to an address that is not a permitted target/);
        assert.ok(!r.error!.includes(address), `the stored refusal names ${address}: ${r.error}`);
      }
    }
    // The receiver is on loopback: in production even that is refused, also as a literal and over http.
    for (const url of [receiver.url, receiver.url.replace('127.0.0.1', 'localhost')]) {
      const r = await sendWebhook({ url, headers, body: '{}', policy: production });
      assert.match(r.error!, /^refused: url must be an https URL naming its host by a DNS name/);
    }
    const r = await sendWebhook({
      url: receiver.url.replace('http:', 'https:').replace('127.0.0.1', 'loopback.example.test'),
      headers,
      body: '{}',
      policy: production,
      resolver: fakeResolver({ 'loopback.example.test': ['127.0.0.1'] }),
    });
    assert.match(r.error!, /^refused: the host of url resolves to an address that is not a permitted target/);
    assert.ok(!r.error!.includes('127.0.0.1'), r.error!);
    assert.equal(receiver.received.length, before, 'nothing reached the receiver');
  });

  test('the connection goes to the address that was checked: the name is resolved once, and sent as Host', async () => {
    const port = new URL(receiver.url).port;
    // A resolver that answers differently the second time: only the checked answer can have been used.
    let answers = 0;
    const rebinding: Resolver = async () =>
      answers++ === 0 ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '10.0.0.1', family: 4 }];
    const r = await sendWebhook({
      url: `http://localhost:${port}/hooks?x=1`,
      headers,
      body: '{"ok":true}',
      policy: development,
      resolver: rebinding,
    });
    assert.equal(r.succeeded, true, JSON.stringify(r));
    assert.equal(answers, 1, 'resolved once: the socket did not ask DNS again');
    const last = receiver.received.at(-1)!;
    assert.equal(last.headers['host'], `localhost:${port}`);
    assert.equal(last.body, '{"ok":true}');
  });
});

describe('registration in production (NODE_ENV=production)', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ worker: false, env: { NODE_ENV: 'production', PUBLIC_BASE_URL: 'https://api.example.test' } });
  });
  after(async () => {
    await stack.stop();
  });

  test('only public https URLs: everything else is a 400 naming url, and nothing is registered', async () => {
    const c = await newCustomer(stack, 1);
    const refused = [
      'http://hooks.example.com/x', // not https
      'https://127.0.0.1/x',
      'https://localhost/x', // resolves to loopback
      'https://[::1]/x',
      'https://10.0.0.8/x',
      'https://172.20.0.1/x',
      'https://192.168.0.10/x',
      'https://169.254.169.254/latest/meta-data',
      'https://100.100.100.100/x',
      'https://[fe80::1]/x',
      'https://[fd00::1]/x',
      'https://[::ffff:192.168.0.1]/x',
      'https://0.0.0.0/x',
      'https://224.0.0.251/x',
    ];
    for (const url of refused) {
      const r = await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url } });
      assert.equal(r.status, 400, `${url}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.param, 'url');
      assert.equal(r.body.error.type, 'invalid_request_error');
      assert.equal(r.body.error.code, 'url_not_allowed', url);
    }
    assert.deepEqual((await http(stack.baseUrl, 'GET', '/v2/webhooks', { token: c.key })).body.data, []);
  });

  test('registration states its rule as a pattern and resolves nothing: where a name points is checked at every delivery', async () => {
    const c = await newCustomer(stack, 1);
    const service = new WebhooksService({ db: stack.db, policy: production });
    const principal = { key_id: 'k', workspace_id: c.workspaceId, models: null };
    // This machine has no DNS: a public-looking name is registered all the same; the sender resolves
    // and checks it at each attempt (above: a name resolving to a private address is never connected to).
    const created = await service.create(principal, { url: 'https://hooks.example.com/video-events' });
    assert.equal(created.url, 'https://hooks.example.com/video-events');
    const pattern = new RegExp(webhookUrlPattern(production));
    for (const ok of ['https://hooks.example.com/x?y=1', 'https://a.b:8443/', 'https://EXAMPLE.org']) assert.ok(pattern.test(ok), ok);
    for (const no of [
      'https://10.0.0.1/x',
      'https://localhost/x',
      'https://LocalHost:1/',
      'https://[::1]/',
      'http://hooks.example.com/',
      'https://a.b:0/',
      'https://u@a.b/',
      'https://a.b/#x',
      'https://xn--a.b/',
    ]) {
      assert.ok(!pattern.test(no), no);
      await assert.rejects(
        service.create(principal, { url: no }),
        (err: any) => err.status === 400 && err.param === 'url' && err.code === 'url_not_allowed',
        no,
      );
    }
    const listed = await http(stack.baseUrl, 'GET', '/v2/webhooks', { token: c.key });
    assert.deepEqual(
      listed.body.data.map((e: any) => e.url),
      ['https://hooks.example.com/video-events'],
    );
  });
});
