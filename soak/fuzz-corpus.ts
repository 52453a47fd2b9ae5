// A corpus of malformed requests, generated deterministically from a seed (fast-check's generators,
// sampled with that seed): deep nesting, wrong types, strings past their limits (within the body
// limit), bodies past the body limit, bad multipart, bad base64 images, unknown fields, broken JSON,
// bad query strings, bad ids, bad credentials. Each case says what the service must answer: `reject`
// (a 4xx; a 2xx is a defect) or `no_5xx` (anything but a 5xx other than 503: some bodies in the class
// are valid). Never a webhook URL that could leave the machine: only hand-written, refused ones.
import fc from 'fast-check';
import { pngImage } from '../test/helpers/images.js';

export interface FuzzCase {
  /** The class of malformation, for the report. */
  kind: string;
  method: string;
  path: string;
  /** The route it is counted under. */
  route: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Send without the workspace's API key (or with `headers.authorization` as given). */
  noAuth?: boolean;
  expect: 'reject' | 'no_5xx';
}

const CREATE = { method: 'POST', path: '/v2/videos/generations', route: 'fuzz POST /v2/videos/generations' } as const;
const SPEECH = { method: 'POST', path: '/v2/audio/speech', route: 'fuzz POST /v2/audio/speech' } as const;
const WEBHOOK = { method: 'POST', path: '/v2/webhooks', route: 'fuzz POST /v2/webhooks' } as const;
const CLONE = { method: 'POST', path: '/v2/audio/voices', route: 'fuzz POST /v2/audio/voices' } as const;
const JSON_HEADERS = { 'content-type': 'application/json' };

/** A valid create for the simulator: the base the mutations start from. */
export const validCreate = () => ({
  prompt: 'a lighthouse at dusk',
  model: 'sim-video-1',
  durationSeconds: 4,
  resolution: '720p',
  n: 1,
  parameters: { simulate: { delay_ms: 200 } },
});

/** `{"a":{"a":...}}` or `[[...]]` `depth` levels deep, as text (JSON.stringify would recurse that deep). */
export function nested(depth: number, shape: 'object' | 'array'): string {
  return shape === 'object' ? '{"a":'.repeat(depth) + '1' + '}'.repeat(depth) : '['.repeat(depth) + '1' + ']'.repeat(depth);
}

const KiB = 1024;
const MiB = 1024 * KiB;

/** Every field of a create and its JSON type: a wrong type is any value of another type. */
const CREATE_FIELD_TYPES: Record<string, 'string' | 'number' | 'boolean' | 'object'> = {
  prompt: 'string',
  model: 'string',
  n: 'number',
  durationSeconds: 'number',
  resolution: 'string',
  aspectRatio: 'string',
  seed: 'number',
  generateAudio: 'boolean',
  negativePrompt: 'string',
  parameters: 'object',
  image: 'object',
};

const typeOf = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function multipart(
  boundary: string,
  parts: { name: string; filename?: string; type?: string; data: string | Buffer }[],
  close = true,
): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${p.type ? `Content-Type: ${p.type}\r\n` : ''}\r\n`));
    chunks.push(Buffer.isBuffer(p.data) ? p.data : Buffer.from(p.data));
    chunks.push(Buffer.from('\r\n'));
  }
  if (close) chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

export function generateCorpus(seed: number): FuzzCase[] {
  const sample = <T>(arb: fc.Arbitrary<T>, n: number, salt: number) => fc.sample(arb, { seed: seed + salt, numRuns: n });
  const cases: FuzzCase[] = [];
  const json = (
    kind: string,
    target: { method: string; path: string; route: string },
    body: string,
    expect: FuzzCase['expect'] = 'reject',
    headers: Record<string, string> = {},
  ) => cases.push({ kind, ...target, headers: { ...JSON_HEADERS, ...headers }, body, expect });

  // Deep nesting: in a create's `parameters` (which takes any object: some are accepted), with and
  // without an Idempotency-Key (whose fingerprint canonicalizes the body), and as the whole body elsewhere.
  for (const depth of [64, 1_000, 5_000, 20_000]) {
    for (const shape of ['object', 'array'] as const) {
      const body = `{"prompt":"deep","model":"sim-video-1","n":1,"durationSeconds":4,"parameters":{"simulate":{"delay_ms":100},"deep":${nested(depth, shape)}}}`;
      json('deep_nesting', CREATE, body, 'no_5xx');
      json('deep_nesting', CREATE, body, 'no_5xx', { 'idempotency-key': `fuzz-deep-${seed}-${depth}-${shape}` });
      json('deep_nesting', SPEECH, `{"input":"hi","voice":"sim-narrator","extra":${nested(Math.min(depth, 20_000), shape)}}`);
      json('deep_nesting', WEBHOOK, `{"url":${nested(Math.min(depth, 20_000), shape)}}`);
    }
  }

  // Wrong types: one field of a valid create replaced by a value of another JSON type.
  const anyValue = fc.oneof(
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.string({ maxLength: 20 }),
    fc.array(fc.integer(), { maxLength: 3 }),
    fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }),
  );
  for (const [field, type] of Object.entries(CREATE_FIELD_TYPES)) {
    const values = sample(
      anyValue.filter((v) => typeOf(v) !== type),
      3,
      field.length,
    );
    for (const v of values) json('wrong_type', CREATE, JSON.stringify({ ...validCreate(), [field]: v }));
  }
  for (const v of sample(
    anyValue.filter((v) => typeof v !== 'string'),
    4,
    101,
  )) {
    json('wrong_type', SPEECH, JSON.stringify({ input: v, voice: 'sim-narrator' }));
    json('wrong_type', SPEECH, JSON.stringify({ input: 'hello', voice: v }));
    json('wrong_type', WEBHOOK, JSON.stringify({ url: v }));
  }
  for (const v of ['[]', '42', '"a string"', 'null', 'true']) json('wrong_type', CREATE, v);

  // Strings past their limits, within the body limit (21.4 MiB for a create, 64 KiB elsewhere).
  for (const chars of [4_001, 100_000, 2 * MiB])
    json('huge_string', CREATE, JSON.stringify({ ...validCreate(), prompt: 'x'.repeat(chars) }));
  json('huge_string', CREATE, JSON.stringify({ ...validCreate(), negativePrompt: 'y'.repeat(1_001) }));
  json('huge_string', CREATE, JSON.stringify({ ...validCreate(), model: 'm'.repeat(50 * KiB) }));
  json('huge_string', SPEECH, JSON.stringify({ input: 'z'.repeat(5_000), voice: 'sim-narrator' }));
  json('huge_string', WEBHOOK, JSON.stringify({ url: `http://127.0.0.1:1/${'p'.repeat(3_000)}` }));
  for (const s of sample(fc.string({ unit: 'binary', minLength: 4_001, maxLength: 6_000 }), 2, 7))
    json('huge_string', CREATE, JSON.stringify({ ...validCreate(), prompt: s }));
  // Past the body limit: 413.
  json('body_too_large', SPEECH, JSON.stringify({ input: 'a'.repeat(70 * KiB), voice: 'sim-narrator' }));
  json('body_too_large', WEBHOOK, JSON.stringify({ url: 'http://127.0.0.1:1/', pad: 'b'.repeat(70 * KiB) }));

  // Unknown fields (every body is a strict object).
  for (const k of sample(
    fc.string({ minLength: 1, maxLength: 12 }).filter((k) => !(k in CREATE_FIELD_TYPES) && k !== 'lastFrame'),
    4,
    13,
  )) {
    json('unknown_field', CREATE, JSON.stringify({ ...validCreate(), [k]: 1 }));
  }
  json('unknown_field', CREATE, '{"prompt":"p","model":"sim-video-1","__proto__":{"admin":true}}');
  json('unknown_field', SPEECH, JSON.stringify({ input: 'hello', voice: 'sim-narrator', pitch: 2 }));
  json('unknown_field', WEBHOOK, JSON.stringify({ url: 'http://127.0.0.1:1/', secret: 'mine' }));

  // Bad base64 images and images that are not what they say.
  const png = pngImage(16, 16, 3);
  const image = (bytesBase64Encoded: unknown, mimeType: unknown) =>
    JSON.stringify({ ...validCreate(), image: { bytesBase64Encoded, mimeType } });
  json('bad_image', CREATE, image('!!!not base64!!!', 'image/png'));
  json('bad_image', CREATE, image(png.toString('base64').slice(0, 41), 'image/png')); // truncated
  json('bad_image', CREATE, image(png.toString('base64'), 'image/jpeg')); // type mismatch
  json('bad_image', CREATE, image(png.toString('base64'), 'image/gif'));
  json('bad_image', CREATE, image('', 'image/png'));
  json('bad_image', CREATE, image(png.toString('base64'), 'text/html'));
  json('bad_image', CREATE, image(12345, 'image/png'));
  json(
    'bad_image',
    CREATE,
    JSON.stringify({ ...validCreate(), lastFrame: { bytesBase64Encoded: png.toString('base64'), mimeType: 'image/png' } }),
  ); // lastFrame without image
  for (const bytes of sample(fc.uint8Array({ minLength: 8, maxLength: 2_000 }), 3, 17))
    json('bad_image', CREATE, image(Buffer.from(bytes).toString('base64'), 'image/png'));
  json('bad_image', CREATE, image(Buffer.alloc(8 * MiB + 1, 0x41).toString('base64'), 'image/png')); // over 8 MiB decoded

  // Broken JSON and wrong content types.
  for (const s of sample(
    fc.string({ maxLength: 200 }).filter((s) => {
      try {
        JSON.parse(s);
        return false;
      } catch {
        return true;
      }
    }),
    6,
    19,
  ))
    json('bad_json', CREATE, s);
  json('bad_json', CREATE, JSON.stringify(validCreate()).slice(0, 30));
  json('bad_json', SPEECH, '{"input": "hi", "voice": "sim-narrator"');
  json('bad_json', CREATE, '');
  cases.push({
    kind: 'bad_content_type',
    ...CREATE,
    headers: { 'content-type': 'text/plain' },
    body: JSON.stringify(validCreate()),
    expect: 'reject',
  });
  cases.push({
    kind: 'bad_content_type',
    ...SPEECH,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'input=hi&voice=sim-narrator',
    expect: 'reject',
  });
  json('nul_char', CREATE, JSON.stringify({ ...validCreate(), prompt: 'a\u0000b' }));
  json('nul_char', SPEECH, JSON.stringify({ input: 'a\u0000b', voice: 'sim-narrator' }));

  // Bad multipart voice clones.
  const wavLike = Buffer.concat([Buffer.from('RIFF\x24\x00\x00\x00WAVEfmt ', 'latin1'), Buffer.alloc(64)]);
  const mp = (body: Buffer, contentType: string) =>
    cases.push({ kind: 'bad_multipart', ...CLONE, headers: { 'content-type': contentType }, body, expect: 'reject' });
  mp(
    multipart('B0UND', [
      { name: 'name', data: 'v' },
      { name: 'file', filename: 'a.wav', type: 'audio/wav', data: 'not audio at all '.repeat(20) },
    ]),
    'multipart/form-data; boundary=B0UND',
  );
  mp(
    multipart(
      'B0UND',
      [
        { name: 'name', data: 'v' },
        { name: 'file', filename: 'a.wav', type: 'audio/wav', data: wavLike },
      ],
      false,
    ),
    'multipart/form-data; boundary=B0UND',
  ); // never closed
  mp(multipart('B0UND', [{ name: 'name', data: 'v' }]), 'multipart/form-data; boundary=B0UND'); // no file
  mp(multipart('B0UND', [{ name: 'file', filename: 'a.wav', type: 'audio/wav', data: wavLike }]), 'multipart/form-data; boundary=B0UND'); // no name
  mp(
    multipart('B0UND', [
      { name: 'name', data: 'v' },
      { name: 'file', filename: 'a.wav', data: wavLike },
    ]),
    'multipart/form-data; boundary=OTHER',
  ); // wrong boundary
  mp(multipart('B0UND', [{ name: 'name', data: 'v' }]), 'multipart/form-data'); // no boundary
  mp(
    multipart('B0UND', [
      { name: 'name', data: 'n'.repeat(5_000) },
      { name: 'file', filename: 'a.wav', data: wavLike },
    ]),
    'multipart/form-data; boundary=B0UND',
  );
  mp(
    multipart('B0UND', [
      { name: 'name', data: 'v' },
      ...Array.from({ length: 12 }, (_, i) => ({ name: 'file', filename: `${i}.wav`, data: wavLike })),
    ]),
    'multipart/form-data; boundary=B0UND',
  );
  for (const bytes of sample(fc.uint8Array({ minLength: 1, maxLength: 3_000 }), 4, 23))
    mp(Buffer.from(bytes), 'multipart/form-data; boundary=B0UND');

  // Webhook targets the service must refuse (none of them reachable beyond this machine).
  for (const url of [
    'ftp://127.0.0.1/x',
    'https://10.0.0.1/hook',
    'http://user:pw@127.0.0.1:1/',
    'https://169.254.169.254/latest',
    'javascript:alert(1)',
    'http://127.0.0.1:1/#frag',
    '',
  ]) {
    json('bad_webhook', WEBHOOK, JSON.stringify({ url }));
  }
  json('bad_webhook', WEBHOOK, JSON.stringify({ url: 'http://127.0.0.1:1/', events: ['video.generation.exploded'] }));

  // Bad speech requests.
  json('bad_speech', SPEECH, JSON.stringify({ input: 'hello', voice: 'no-such-voice' }));
  json('bad_speech', SPEECH, JSON.stringify({ input: '   ', voice: 'sim-narrator' }));
  json('bad_speech', SPEECH, JSON.stringify({ input: 'hello', voice: 'sim-narrator', response_format: 'mp3x' }));
  json('bad_speech', SPEECH, JSON.stringify({ input: 'hello', voice: 'sim-narrator', model: 'no-such-model' }));

  // Bad query strings and ids.
  const get = (kind: string, path: string, route: string, expect: FuzzCase['expect'] = 'reject') =>
    cases.push({ kind, method: 'GET', path, route, expect });
  for (const q of [
    'limit=0',
    'limit=-1',
    'limit=101',
    'limit=abc',
    'limit=1e9',
    'status=exploded',
    'limit=1&limit=2',
    'unknown=1',
    `after=${'%FF'.repeat(10)}`,
  ]) {
    get('bad_query', `/v2/videos/generations?${q}`, 'fuzz GET /v2/videos/generations');
    get('bad_query', `/v2/ledger?${q}`, 'fuzz GET /v2/ledger');
  }
  for (const s of sample(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }), 6, 29)) {
    get('bad_query', `/v2/videos/generations?after=${encodeURIComponent(s)}`, 'fuzz GET /v2/videos/generations', 'no_5xx');
    get('bad_id', `/v2/videos/generations/${encodeURIComponent(s)}`, 'fuzz GET /v2/videos/generations/{id}');
    cases.push({
      kind: 'bad_id',
      method: 'POST',
      path: `/v2/videos/generations/${encodeURIComponent(s)}/cancel`,
      route: 'fuzz POST /v2/videos/generations/{id}/cancel',
      expect: 'reject',
    });
    cases.push({
      kind: 'bad_id',
      method: 'DELETE',
      path: `/v2/audio/voices/${encodeURIComponent(s)}`,
      route: 'fuzz DELETE /v2/audio/voices/{id}',
      expect: 'reject',
    });
  }
  get('bad_id', `/v2/videos/generations/${'9'.repeat(8_000)}`, 'fuzz GET /v2/videos/generations/{id}');
  get('bad_id', '/v2/videos/generations/00000000-0000-0000-0000-000000000000', 'fuzz GET /v2/videos/generations/{id}');

  // Bad credentials.
  for (const authorization of ['Bearer ', 'Bearer vva_sk_000000000000', 'Basic YWRtaW46YWRtaW4=', `Bearer ${'k'.repeat(4_000)}`]) {
    cases.push({
      kind: 'bad_auth',
      ...CREATE,
      headers: { ...JSON_HEADERS, authorization },
      body: JSON.stringify(validCreate()),
      noAuth: true,
      expect: 'reject',
    });
  }
  cases.push({
    kind: 'bad_auth',
    method: 'GET',
    path: '/admin/v1/ledger/audit',
    route: 'fuzz GET /admin/v1/ledger/audit',
    expect: 'reject',
  });
  return cases;
}
