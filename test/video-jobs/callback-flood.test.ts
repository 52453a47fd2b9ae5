// A flood of the provider callback routes, which take no API key, against a real API process: gzip
// bombs (about 22 KiB that inflate to 22 MiB), unsigned bodies of megabytes, bodies with signature-shaped
// headers up to each backend's limit (read, then refused by verification), and declared lengths above
// it, all at once. The process's resident memory stays within a bound that holding the bodies would
// exceed many times over, and an authenticated request is served during the flood.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { FalFake } from '../fakes/fal-fake.js';
import { ReplicateFake } from '../fakes/replicate-fake.js';
import { ADMIN_TOKEN, createTestDatabase, http as api, infra, newCustomer } from '../helpers/stack.js';

const MiB = 1024 * 1024;
/** Inflated, one bomb alone is this large: below the limit the route used to inflate bodies up to. */
const BOMB_INFLATED_BYTES = 22 * MiB;
/** What the flood may add to the process's resident memory (holding it would take several GiB). */
const RSS_GROWTH_BYTES_MAX = 160 * MiB;

let fal: FalFake;
let replicate: ReplicateFake;
let child: ChildProcess;
let base = '';

/** The API process's resident memory (0 once it has exited). */
const rssBytes = () => {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'));
    return Number(m![1]) * 1024;
  } catch {
    return 0;
  }
};

before(async () => {
  fal = await new FalFake().start();
  replicate = await new ReplicateFake().start();
  const { temporalAddress, tmp } = infra();
  child = spawn(process.execPath, ['--import', 'tsx', 'src/api-main.ts'], {
    env: {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: fs.mkdtempSync(path.join(tmp, 'flood-')),
      DATABASE_URL: await createTestDatabase(),
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_TASK_QUEUE: `test-${randomUUID()}`,
      ADMIN_TOKEN,
      URL_SIGNING_SECRET: 'test-url-signing-secret-0123456789abcdef',
      SIMULATOR: 'on',
      LOG_LEVEL: 'info',
      RATE_LIMIT_READS_PER_MINUTE: '1000000',
      // One source sends the whole flood: its rate is not what bounds it here (the route test covers the 429).
      PROVIDER_CALLBACKS_PER_SOURCE_PER_MINUTE: '1000000',
      ...fal.env(),
      ...replicate.env(),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (d) => (output += d));
  // The process says where it listens once it is up ("api listening", with its URL).
  base = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /"url":"(http:\/\/[^"]+)"/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`the API exited (${code}): ${output}${out}`)));
  });
});

after(async () => {
  child?.kill('SIGTERM');
  await fal?.stop();
  await replicate?.stop();
});

/** One request; its status, or 0 when the server closed the connection before answering (a refusal of an unread body may). */
function send(p: string, headers: Record<string, string>, body: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const url = new URL(p, base);
    const req = http.request(
      url,
      { method: 'POST', headers: { ...headers, 'content-length': String(body.length) }, agent: false },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

test('gzip bombs, unsigned and oversized bodies sent at once to the callback routes leave memory bounded and the API serving', async () => {
  const c = await newCustomer({ baseUrl: base }, 1);
  const served = async () => {
    const started = Date.now();
    const status = await api(base, 'GET', '/v2/models', { token: c.key }).then(
      (r) => r.status,
      () => 0,
    );
    return { status, ms: Date.now() - started };
  };
  assert.equal((await served()).status, 200);
  const job = randomUUID();
  const falPath = `/v2/provider-callbacks/fal/${job}`;
  const replicatePath = `/v2/provider-callbacks/replicate/${job}`;
  const bomb = zlib.gzipSync(Buffer.alloc(BOMB_INFLATED_BYTES), { level: 9 });
  assert.ok(bomb.length < 64 * 1024, `${bomb.length} bytes compressed`);
  const falHeaders = () => fal.signCallback(randomUUID(), Buffer.from('x'));
  const replicateHeaders = () => replicate.signCallback(Buffer.from('x'));
  // Warm: the keys fetched, the route's code loaded; then the baseline.
  await send(falPath, falHeaders(), Buffer.from('{}'));
  await send(replicatePath, replicateHeaders(), Buffer.from('{}'));
  await new Promise((r) => setTimeout(r, 500));
  const baseline = rssBytes();

  const kinds: [string, () => Promise<number>][] = [];
  for (let i = 0; i < 48; i++) {
    kinds.push(['fal gzip bomb', () => send(falPath, { ...falHeaders(), 'content-encoding': 'gzip' }, bomb)]);
    kinds.push(['replicate gzip bomb', () => send(replicatePath, { ...replicateHeaders(), 'content-encoding': 'gzip' }, bomb)]);
    kinds.push(['unsigned 2 MiB', () => send(falPath, { 'content-type': 'application/json' }, Buffer.alloc(2 * MiB, 0x20))]);
    kinds.push(['fal forged 60 KiB', () => send(falPath, falHeaders(), Buffer.alloc(60 * 1024, 0x20))]);
    kinds.push(['replicate forged 1 MiB', () => send(replicatePath, replicateHeaders(), Buffer.alloc(MiB - 1024, 0x20))]);
    kinds.push(['replicate 8 MiB', () => send(replicatePath, replicateHeaders(), Buffer.alloc(8 * MiB, 0x20))]);
  }
  let peak = baseline;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, rssBytes());
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const during: { status: number; ms: number }[] = [];
  const flood = Promise.all(kinds.map(async ([kind, go]) => [kind, await go()] as const));
  const probe = (async () => {
    for (let i = 0; i < 5; i++) {
      during.push(await served());
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const results = await flood;
  await probe;
  sampling = false;
  await sampler;

  const byKind = new Map<string, Map<number, number>>();
  for (const [kind, status] of results) {
    const m = byKind.get(kind) ?? new Map<number, number>();
    m.set(status, (m.get(status) ?? 0) + 1);
    byKind.set(kind, m);
  }
  const summary = Object.fromEntries([...byKind].map(([k, m]) => [k, Object.fromEntries(m)]));
  const growth = peak - baseline;
  console.log(
    `callback flood: ${results.length} requests, RSS ${Math.round(baseline / MiB)} -> peak ${Math.round(peak / MiB)} MiB (+${Math.round(growth / MiB)}); ${JSON.stringify(summary)}; authenticated requests during it: ${JSON.stringify(during)}`,
  );
  assert.ok(
    growth < RSS_GROWTH_BYTES_MAX,
    `RSS grew by ${Math.round(growth / MiB)} MiB during the flood (bound ${RSS_GROWTH_BYTES_MAX / MiB} MiB)`,
  );
  // Nothing of the flood was accepted; what was answered was refused (a refusal may also close the connection unanswered: 0).
  for (const [kind, status] of results) assert.ok([0, 401, 413, 415, 429, 503].includes(status), `${kind}: ${status}`);
  for (const kind of ['fal gzip bomb', 'replicate gzip bomb'])
    assert.ok((byKind.get(kind)!.get(415) ?? 0) > 0, `${kind}: ${JSON.stringify(summary[kind])}`);
  assert.ok((byKind.get('fal forged 60 KiB')!.get(401) ?? 0) > 0, 'forged bodies under the limit were read and refused by verification');
  assert.ok(
    during.length === 5 && during.every((d) => d.status === 200 && d.ms < 10_000),
    `authenticated requests during the flood: ${JSON.stringify(during)}`,
  );
  assert.equal((await served()).status, 200);
});
