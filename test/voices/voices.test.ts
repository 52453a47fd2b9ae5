// Voice cloning end to end: real multipart requests (well-formed, over every limit, malformed,
// truncated, aborted) through the real HTTP server, the registry in PostgreSQL, workspace isolation,
// and the durable provider-side deletion run by a real Temporal workflow.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import nodeHttp from 'node:http';
import { randomUUID } from 'node:crypto';
import { http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { SimulatedVoiceProvider } from '../../src/providers/voice/simulator.js';
import { encodeWav } from '../../src/media/wav.js';
import { sniffAudio } from '../../src/media/audio-sniff.js';
import { voiceDeletionWorkflowId } from '../../workflows/voice-deletion.js';
import { DEFAULT_VOICE_CLONES_PER_WORKSPACE, VoicesService } from '../../src/voices/service.js';
import { LARGE_BODIES_PER_KEY_MAX } from '../../src/http/in-flight.js';
import net from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createPool } from '../../src/db/pool.js';
import { createLogger } from '../../src/logger.js';
import { createReconcilerActivities, type ReconcileReport } from '../../activities/reconciler.js';

let stack: Stack;
let sim: SimulatedVoiceProvider;
before(async () => {
  stack = await startStack();
  sim = new SimulatedVoiceProvider(stack.db);
});
after(async () => {
  await stack.stop();
});

const MiB = 1024 * 1024;

/** A real WAV file: a sine tone, 16-bit mono 22.05 kHz. */
function wavFile(seconds: number, hz = 440): Buffer {
  const samples = new Int16Array(Math.round(seconds * 22_050));
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / 22_050));
  return encodeWav(samples, 22_050);
}

/** A WAV of exactly `bytes` bytes (header + silence). */
function wavOfSize(bytes: number): Buffer {
  const b = wavFile(0.01);
  const out = Buffer.alloc(bytes);
  b.copy(out, 0, 0, 44);
  return out;
}

/** Two MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz): recognised by frame sync. */
function mp3File(): Buffer {
  const frame = Buffer.alloc(417);
  Buffer.from([0xff, 0xfb, 0x90, 0x64]).copy(frame);
  return Buffer.concat([frame, frame, frame]);
}

/** An Ogg page starting an Opus stream. */
function oggOpusFile(): Buffer {
  const head = Buffer.alloc(27 + 1 + 19);
  head.write('OggS', 0, 'ascii');
  head[26] = 1; // one segment
  head[27] = 19;
  head.write('OpusHead', 28, 'ascii');
  return head;
}

type Part = { name: string; value: string } | { name: string; file: Buffer; filename: string; type?: string };

function formOf(parts: Part[]): FormData {
  const fd = new FormData();
  for (const p of parts) {
    if ('value' in p) fd.append(p.name, p.value);
    else fd.append(p.name, new Blob([new Uint8Array(p.file)], { type: p.type ?? 'audio/wav' }), p.filename);
  }
  return fd;
}

async function postForm(key: string | null, body: FormData | Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(`${stack.baseUrl}/v2/audio/voices`, {
    method: 'POST',
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
    body: body as BodyInit,
  });
  const text = await res.text();
  const isJson = (res.headers.get('content-type') ?? '').includes('application/json');
  return { status: res.status, headers: res.headers, body: isJson ? JSON.parse(text) : text };
}

const BOUNDARY = '----vva-test-boundary-7MA4YWxkTrZu0gW';
const multipartType = `multipart/form-data; boundary=${BOUNDARY}`;

/** A handcrafted multipart body; `close: false` leaves out the closing boundary. */
function rawMultipart(parts: Part[], opts: { close?: boolean } = {}): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition =
      'value' in p ? `form-data; name="${p.name}"` : `form-data; name="${p.name}"; filename="${p.filename}"\r\nContent-Type: ${p.type ?? 'audio/wav'}`;
    chunks.push(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: ${disposition}\r\n\r\n`));
    chunks.push('value' in p ? Buffer.from(p.value) : p.file);
    chunks.push(Buffer.from('\r\n'));
  }
  if (opts.close !== false) chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(chunks);
}

const sample = (filename = 'sample.wav', seconds = 0.5): Part => ({ name: 'file', file: wavFile(seconds), filename });

async function registryCount(workspaceId: string): Promise<number> {
  const r = await stack.db.query('SELECT 1 FROM voices WHERE workspace_id = $1', [workspaceId]);
  return r.rowCount ?? 0;
}

/** A raw multipart upload of `body` (declared in full) to POST /v2/audio/voices; the caller sends what it wants of it. */
function uploadRequest(key: string, body: Buffer): nodeHttp.ClientRequest {
  const url = new URL(stack.baseUrl);
  return nodeHttp.request({
    host: url.hostname,
    port: url.port,
    method: 'POST',
    path: '/v2/audio/voices',
    headers: { authorization: `Bearer ${key}`, 'content-type': multipartType, 'content-length': String(body.length) },
  });
}

function assertError(res: { status: number; body: any }, status: number, code: string, param: string | null) {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.error.code, code, JSON.stringify(res.body));
  assert.equal(res.body.error.param, param, JSON.stringify(res.body));
  assert.equal(typeof res.body.error.message, 'string');
  assert.equal(typeof res.body.error.type, 'string');
}

describe('audio sniffing', () => {
  test('recognises audio by content, not by name or declared type', async () => {
    assert.equal(await sniffAudio(wavFile(0.1)), 'wav');
    assert.equal(await sniffAudio(mp3File()), 'mp3');
    assert.equal(await sniffAudio(oggOpusFile()), 'ogg');
    assert.equal(await sniffAudio(Buffer.concat([Buffer.from('fLaC'), Buffer.alloc(40)])), 'flac');
    const m4a = Buffer.alloc(32);
    m4a.writeUInt32BE(24, 0);
    m4a.write('ftypM4A \0\0\0\0M4A isom', 4, 'ascii');
    assert.equal(await sniffAudio(m4a), 'm4a');
    const mp4Video = Buffer.from(m4a);
    mp4Video.write('ftypisom\0\0\0\0isomavc1', 4, 'ascii');
    assert.equal(await sniffAudio(mp4Video), null, 'an MP4 without an audio brand');
    const m4aGeneric = Buffer.from(m4a);
    m4aGeneric.write('ftypmp42\0\0\0\0mp42M4A ', 4, 'ascii');
    assert.equal(await sniffAudio(m4aGeneric), 'm4a', 'a generic major brand with an audio compatible brand (a check file-type does not make)');
    // EBML header with DocType "webm"
    const webm = Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x87, 0x42, 0x82, 0x84, ...Buffer.from('webm')]);
    assert.equal(await sniffAudio(webm), 'webm');
    const id3 = Buffer.concat([Buffer.from('ID3\x04\x00\x00\x00\x00\x00\x00', 'latin1'), mp3File()]);
    assert.equal(await sniffAudio(id3), 'mp3');
    assert.equal(await sniffAudio(Buffer.from('hello, this is plain text and not audio at all')), null);
    assert.equal(await sniffAudio(Buffer.from('%PDF-1.7\n')), null);
    assert.equal(await sniffAudio(Buffer.from([0xff, 0xfb, 0x90, 0x64, 1, 2, 3, 4, 5, 6, 7, 8])), null, 'a lone frame header is not enough');
    assert.equal(await sniffAudio(Buffer.from('OggS\0\x02' + '\0'.repeat(20) + '\x01\x10\x80theora', 'latin1')), null, 'Ogg video');
  });
});

describe('POST /v2/audio/voices', () => {
  test('a valid clone with several files of several formats: 200 with the voice record', async () => {
    const c = await newCustomer(stack, 5);
    const res = await postForm(
      c.key,
      formOf([
        { name: 'name', value: '  Zoë the narrator 🎙 ' },
        sample('one.wav'),
        { name: 'file', file: mp3File(), filename: 'two.mp3', type: 'audio/mpeg' },
        { name: 'file', file: oggOpusFile(), filename: 'drei-ü.ogg', type: 'application/octet-stream' },
      ]),
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.headers.get('content-type')?.startsWith('application/json'), true);
    const v = res.body;
    assert.deepEqual(Object.keys(v).sort(), ['created', 'id', 'name', 'object', 'requires_verification', 'voice_id']);
    assert.match(v.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(v.object, 'voice');
    assert.match(v.voice_id, /^simvoice_[0-9a-f]{20}$/);
    assert.equal(v.name, 'Zoë the narrator 🎙');
    assert.equal(v.requires_verification, true, 'cloned without a consent: it needs verification');
    assert.ok(Number.isInteger(v.created) && Math.abs(v.created - Date.now() / 1000) < 60);
    // registered for this workspace, and held by the provider with every sample
    const row = await stack.db.query('SELECT workspace_id, provider, voice_id FROM voices WHERE id = $1', [v.id]);
    assert.deepEqual(row.rows[0], { workspace_id: c.workspaceId, provider: 'simulator', voice_id: v.voice_id });
    const held = await stack.db.query('SELECT samples FROM simulator.voices WHERE voice_id = $1', [v.voice_id]);
    assert.equal(held.rows[0]?.samples, 3);
    // and it is the workspace's, by GET
    const got = await http(stack.baseUrl, 'GET', `/v2/audio/voices/${v.id}`, { token: c.key });
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, v);
  });

  test('up to the limits exactly is accepted: 10 files, a 100-character name', async () => {
    const c = await newCustomer(stack, 5);
    const files = Array.from({ length: 10 }, (_, i) => sample(`s${i}.wav`, 0.05));
    const res = await postForm(c.key, formOf([{ name: 'name', value: 'x'.repeat(100) }, ...files]));
    assert.equal(res.status, 200, JSON.stringify(res.body));
  });

  test('each missing part is a 400 naming it', async () => {
    const c = await newCustomer(stack, 5);
    const noName = await postForm(c.key, formOf([sample()]));
    assertError(noName, 400, 'missing_parameter', 'name');
    assert.match(noName.body.error.message, /\bname\b/);
    const noFile = await postForm(c.key, formOf([{ name: 'name', value: 'v' }]));
    assertError(noFile, 400, 'missing_parameter', 'file');
    assert.match(noFile.body.error.message, /\bfile\b/);
    const neither = await postForm(c.key, rawMultipart([]), { 'content-type': multipartType });
    assertError(neither, 400, 'missing_parameter', 'name');
    assert.match(neither.body.error.message, /name, file/);
    // a "file" part that is text, not a file upload
    const textFile = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, { name: 'file', value: 'not a file' }]));
    assertError(textFile, 400, 'invalid_parameter', 'file');
    const emptyName = await postForm(c.key, formOf([{ name: 'name', value: '   ' }, sample()]));
    assertError(emptyName, 400, 'invalid_parameter', 'name');
    assert.equal(await registryCount(c.workspaceId), 0);
  });

  test('name limits: too long (in characters, then in bytes), control characters, given twice', async () => {
    const c = await newCustomer(stack, 5);
    const long = await postForm(c.key, formOf([{ name: 'name', value: 'é'.repeat(101) }, sample()]));
    assertError(long, 400, 'invalid_parameter', 'name');
    assert.match(long.body.error.message, /100 characters/);
    const huge = await postForm(c.key, formOf([{ name: 'name', value: 'n'.repeat(5000) }, sample()]));
    assertError(huge, 400, 'invalid_parameter', 'name');
    const ctrl = await postForm(c.key, formOf([{ name: 'name', value: 'bad\u0007name' }, sample()]));
    assertError(ctrl, 400, 'invalid_parameter', 'name');
    const twice = await postForm(c.key, formOf([{ name: 'name', value: 'a' }, { name: 'name', value: 'b' }, sample()]));
    assertError(twice, 400, 'invalid_parameter', 'name');
    assert.equal(await registryCount(c.workspaceId), 0);
  });

  test('unknown parts, files in other parts, nested part names: 400 naming the part', async () => {
    const c = await newCustomer(stack, 5);
    const extra = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, { name: 'description', value: 'd' }, sample()]));
    assertError(extra, 400, 'unknown_parameter', 'description');
    const otherFile = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, { name: 'audio', file: wavFile(0.1), filename: 'a.wav' }]));
    assertError(otherFile, 400, 'unknown_parameter', 'audio');
    const nested = await postForm(c.key, formOf([{ name: 'name[x]', value: 'v' }, sample()]));
    assert.equal(nested.status, 400, JSON.stringify(nested.body));
  });

  test('too many files: 400 naming file', async () => {
    const c = await newCustomer(stack, 5);
    const files = Array.from({ length: 11 }, (_, i) => sample(`s${i}.wav`, 0.05));
    const res = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, ...files]));
    assertError(res, 400, 'too_many_files', 'file');
    assert.match(res.body.error.message, /10/);
    const parts = Array.from({ length: 21 }, (_, i) => ({ name: `p${i}`, value: 'x' }));
    const tooManyParts = await postForm(c.key, formOf(parts));
    assert.equal(tooManyParts.status, 400, JSON.stringify(tooManyParts.body));
    assert.equal(await registryCount(c.workspaceId), 0);
  });

  test('a file too large: 413 naming file; 10 MiB exactly is accepted', async () => {
    const c = await newCustomer(stack, 5);
    const res = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, { name: 'file', file: wavOfSize(10 * MiB + 1), filename: 'big.wav' }]));
    assertError(res, 413, 'file_too_large', 'file');
    assert.match(res.body.error.message, /big\.wav/);
    assert.match(res.body.error.message, /10 MiB/);
    const exact = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, { name: 'file', file: wavOfSize(10 * MiB), filename: 'max.wav' }]));
    assert.equal(exact.status, 200, JSON.stringify(exact.body));
    assert.equal(await registryCount(c.workspaceId), 1);
  });

  test('files together too large: 413, both while streaming and from a declared Content-Length', async () => {
    const c = await newCustomer(stack, 5);
    // 3 x 8.5 MiB = 25.5 MiB: each file is allowed, the total is not (found while reading)
    const streamed = await postForm(
      c.key,
      formOf([{ name: 'name', value: 'v' }, ...[1, 2, 3].map((i) => ({ name: 'file', file: wavOfSize(8.5 * MiB), filename: `${i}.wav` }))]),
    );
    assertError(streamed, 413, 'upload_too_large', 'file');
    assert.match(streamed.body.error.message, /25 MiB/);
    // 3 x 9.5 MiB: refused from its Content-Length, unread
    const declared = await postForm(
      c.key,
      formOf([{ name: 'name', value: 'v' }, ...[1, 2, 3].map((i) => ({ name: 'file', file: wavOfSize(9.5 * MiB), filename: `${i}.wav` }))]),
    );
    assertError(declared, 413, 'request_too_large', null);
    assert.equal(await registryCount(c.workspaceId), 0);
  });

  test('a file that is not audio, whatever its declared type or name: 415 naming file', async () => {
    const c = await newCustomer(stack, 5);
    const text = await postForm(
      c.key,
      formOf([{ name: 'name', value: 'v' }, sample('ok.wav'), { name: 'file', file: Buffer.from('just some text, honestly'.repeat(10)), filename: 'voice.wav', type: 'audio/wav' }]),
    );
    assertError(text, 415, 'unsupported_file_type', 'file');
    assert.match(text.body.error.message, /voice\.wav/);
    // large enough to be refused from its head, while streaming
    const bigPdf = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(MiB, 0x20)]);
    const pdf = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, { name: 'file', file: bigPdf, filename: 'a.mp3', type: 'audio/mpeg' }]));
    assertError(pdf, 415, 'unsupported_file_type', 'file');
    const empty = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, { name: 'file', file: Buffer.alloc(0), filename: 'e.wav' }]));
    assertError(empty, 400, 'empty_file', 'file');
    assert.equal(await registryCount(c.workspaceId), 0);
  });

  test('malformed and truncated bodies are 4xx, never 5xx', async () => {
    const c = await newCustomer(stack, 5);
    const full = rawMultipart([{ name: 'name', value: 'v' }, sample()]);
    // no closing boundary
    const unclosed = await postForm(c.key, rawMultipart([{ name: 'name', value: 'v' }, sample()], { close: false }), { 'content-type': multipartType });
    assertError(unclosed, 400, 'malformed_multipart', 'file');
    // cut in the middle of the file's bytes
    const cut = await postForm(c.key, full.subarray(0, full.length - 300), { 'content-type': multipartType });
    assertError(cut, 400, 'malformed_multipart', 'file');
    // cut inside a part header
    const headerCut = Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; na`);
    const inHeader = await postForm(c.key, headerCut, { 'content-type': multipartType });
    assert.equal(inHeader.status, 400, JSON.stringify(inHeader.body));
    assert.equal(inHeader.body.error.code, 'malformed_multipart');
    // a part header that is not a header
    const badHeader = Buffer.from(`--${BOUNDARY}\r\n${'x'.repeat(20_000)}\r\n\r\nv\r\n--${BOUNDARY}--\r\n`);
    const malformed = await postForm(c.key, badHeader, { 'content-type': multipartType });
    assert.equal(malformed.status, 400, JSON.stringify(malformed.body));
    // a part without a name
    const nameless = await postForm(c.key, Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data\r\n\r\nv\r\n--${BOUNDARY}--\r\n`), {
      'content-type': multipartType,
    });
    assert.equal(nameless.status, 400, JSON.stringify(nameless.body));
    // no boundary in the content type; garbage body
    const noBoundary = await postForm(c.key, full, { 'content-type': 'multipart/form-data' });
    assertError(noBoundary, 400, 'malformed_multipart', null);
    const garbage = await postForm(c.key, Buffer.from('\x00\x01garbage'.repeat(100), 'latin1'), { 'content-type': multipartType });
    assert.equal(garbage.status, 400, JSON.stringify(garbage.body));
    // not multipart at all
    const json = await http(stack.baseUrl, 'POST', '/v2/audio/voices', { token: c.key, json: { name: 'v' } });
    assertError(json, 415, 'unsupported_media_type', null);
    assert.equal(await registryCount(c.workspaceId), 0);
  });

  test('a client that aborts mid-upload does not hurt the server', async () => {
    const c = await newCustomer(stack, 5);
    const body = rawMultipart([{ name: 'name', value: 'v' }, { name: 'file', file: wavOfSize(2 * MiB), filename: 'a.wav' }]);
    await new Promise<void>((resolve) => {
      const req = uploadRequest(c.key, body);
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.write(body.subarray(0, MiB), () => setTimeout(() => req.destroy(), 100));
    });
    const after = await postForm(c.key, formOf([{ name: 'name', value: 'after abort' }, sample()]));
    assert.equal(after.status, 200, JSON.stringify(after.body));
    assert.equal(await registryCount(c.workspaceId), 1);
  });

  test('at most 8 uploads are held in memory at once: the 9th is a 503 server_busy, and the slots come back', async () => {
    const c = await newCustomer(stack, 5);
    // One key holds at most LARGE_BODIES_PER_KEY_MAX uploads at once: the hanging ones come from several keys.
    const holders = await Promise.all(Array.from({ length: 8 / LARGE_BODIES_PER_KEY_MAX }, () => newCustomer(stack, 5)));
    let opened = 0;
    const body = rawMultipart([{ name: 'name', value: 'v' }, { name: 'file', file: wavOfSize(MiB), filename: 'a.wav' }]);
    const hanging: nodeHttp.ClientRequest[] = [];
    // An upload that never finishes sending holds its slot. One that was itself refused (a probe below
    // can overtake it) is replaced, so that eventually 8 hang.
    const openHanging = () => {
      const req = uploadRequest(holders[opened++ % holders.length]!.key, body);
      req.on('error', () => {});
      req.on('response', (r) => {
        r.resume();
        if ((r.statusCode === 503 || r.statusCode === 429) && hanging.length < 40) openHanging();
      });
      req.write(body.subarray(0, 64 * 1024)); // and never the rest
      hanging.push(req);
    };
    for (let i = 0; i < 8; i++) openHanging();
    await new Promise((res) => setTimeout(res, 200));
    try {
      let busy: Awaited<ReturnType<typeof postForm>> | null = null;
      for (let i = 0; i < 50 && !busy; i++) {
        const r = await postForm(c.key, formOf([{ name: 'name', value: 'ninth' }, sample()]));
        if (r.status === 503) busy = r;
        else await new Promise((res) => setTimeout(res, 100));
      }
      assert.ok(busy, 'the 9th concurrent upload was refused');
      assertError(busy, 503, 'server_busy', null);
      assert.equal(busy.headers.get('retry-after'), '1');
    } finally {
      for (const req of hanging) req.destroy();
    }
    for (let i = 0; ; i++) {
      const r = await postForm(c.key, formOf([{ name: 'name', value: 'after' }, sample()]));
      if (r.status === 200) break;
      assert.ok(i < 50 && r.status === 503, JSON.stringify(r.body));
      await new Promise((res) => setTimeout(res, 100));
    }
  });

  test(`voice clones are counted against the workspace's quota (${DEFAULT_VOICE_CLONES_PER_WORKSPACE}): the next clone is a 409 and reaches no provider; a deletion frees a slot`, async () => {
    const c = await newCustomer(stack, 5);
    await stack.db.query(
      `INSERT INTO voices (id, workspace_id, provider, voice_id, name)
       SELECT gen_random_uuid(), $1::uuid, 'simulator', 'simvoice_fill_' || $1::text || '_' || i, 'filler ' || i FROM generate_series(1, $2::int) i`,
      [c.workspaceId, DEFAULT_VOICE_CLONES_PER_WORKSPACE],
    );
    const before = await stack.db.query('SELECT count(*)::int AS n FROM simulator.voices');
    const full = await postForm(c.key, formOf([{ name: 'name', value: 'one too many' }, sample()]));
    assertError(full, 409, 'voice_limit_reached', null);
    assert.match(full.body.error.message, new RegExp(`already has ${DEFAULT_VOICE_CLONES_PER_WORKSPACE} cloned voices`));
    const afterFull = await stack.db.query('SELECT count(*)::int AS n FROM simulator.voices');
    assert.equal(afterFull.rows[0].n, before.rows[0].n);
    const list = await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: c.key });
    assert.equal(list.body.data.length, DEFAULT_VOICE_CLONES_PER_WORKSPACE);
    const del = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${list.body.data[0].id}`, { token: c.key });
    assert.equal(del.status, 200);
    const ok = await postForm(c.key, formOf([{ name: 'name', value: 'room again' }, sample()]));
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
  });

  test('a workspace without credit clones no voice (402): it cannot take the shared provider account\'s voice slots', async () => {
    const c = await newCustomer(stack, 0);
    const before = await stack.db.query('SELECT count(*)::int AS n FROM simulator.voices');
    const r = await postForm(c.key, formOf([{ name: 'name', value: 'free ride' }, sample()]));
    assertError(r, 402, 'insufficient_credits', null);
    const after = await stack.db.query('SELECT count(*)::int AS n FROM simulator.voices');
    assert.equal(after.rows[0].n, before.rows[0].n, 'the provider was not asked');
    assert.equal((await stack.db.query('SELECT count(*)::int AS n FROM voices WHERE workspace_id = $1', [c.workspaceId])).rows[0].n, 0);
  });

  test('401 without a valid key, before anything is read', async () => {
    const res = await postForm(null, formOf([{ name: 'name', value: 'v' }, sample()]));
    assert.equal(res.status, 401);
    assert.equal(res.body.error.type, 'authentication_error');
    const bad = await postForm('vva_sk_nope', formOf([{ name: 'name', value: 'v' }, sample()]));
    assert.equal(bad.status, 401);
  });

  test('an error reported by the provider is a 400 with its message; an unreachable provider is a 503', async () => {
    const c = await newCustomer(stack, 5);
    await sim.injectFaults('clone', { kind: 'rejected', count: 1, message: 'the samples contain more than one speaker' });
    const rejected = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, sample()]));
    assertError(rejected, 400, 'provider_rejected', null);
    assert.equal(rejected.body.error.message, 'the samples contain more than one speaker');
    await sim.injectFaults('clone', { kind: 'unavailable', count: 1 });
    const down = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, sample()]));
    assertError(down, 503, 'provider_unavailable', null);
    assert.equal(await registryCount(c.workspaceId), 0);
    const ok = await postForm(c.key, formOf([{ name: 'name', value: 'v' }, sample()]));
    assert.equal(ok.status, 200);
  });
});

describe('a voice exists only for its workspace', () => {
  test('from another workspace, get, list, delete and speech all answer as for an id that never existed', async () => {
    const a = await newCustomer(stack, 5);
    const b = await newCustomer(stack, 5);
    const created = await postForm(a.key, formOf([{ name: 'name', value: "a's voice" }, sample()]));
    assert.equal(created.status, 200);
    const voice = created.body;
    const unknownId = '00000000-0000-4000-8000-000000000000';

    const theirs = await http(stack.baseUrl, 'GET', `/v2/audio/voices/${voice.id}`, { token: b.key });
    const unknown = await http(stack.baseUrl, 'GET', `/v2/audio/voices/${unknownId}`, { token: b.key });
    assertError(theirs, 404, 'voice_not_found', 'id');
    assert.deepEqual(theirs.body.error, { ...unknown.body.error, message: unknown.body.error.message.replace(unknownId, voice.id) });
    assertError(await http(stack.baseUrl, 'GET', '/v2/audio/voices/not-a-uuid', { token: b.key }), 404, 'voice_not_found', 'id');

    const listB = await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: b.key });
    assert.equal(listB.status, 200);
    assert.deepEqual(listB.body, { object: 'list', data: [] });

    const delTheirs = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${voice.id}`, { token: b.key });
    const delUnknown = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${unknownId}`, { token: b.key });
    assertError(delTheirs, 404, 'voice_not_found', 'id');
    assert.deepEqual(delTheirs.body.error, { ...delUnknown.body.error, message: delUnknown.body.error.message.replace(unknownId, voice.id) });

    const speakTheirs = await http(stack.baseUrl, 'POST', '/v2/audio/speech', { token: b.key, json: { input: 'hello', voice: voice.voice_id } });
    assertError(speakTheirs, 404, 'voice_not_found', 'voice');

    // a's voice is untouched
    const listA = await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: a.key });
    assert.deepEqual(listA.body, { object: 'list', data: [voice] });
    assert.equal(await sim.hasVoice(voice.voice_id), true);
  });

  test('listing: own live voices only, newest first', async () => {
    const c = await newCustomer(stack, 5);
    const ids: string[] = [];
    for (const n of ['first', 'second', 'third']) {
      const r = await postForm(c.key, formOf([{ name: 'name', value: n }, sample()]));
      assert.equal(r.status, 200);
      ids.push(r.body.id);
    }
    const del = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${ids[1]}`, { token: c.key });
    assert.equal(del.status, 200);
    const list = await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: c.key });
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.data.map((v: any) => v.name),
      ['third', 'first'],
    );
  });
});

describe('DELETE /v2/audio/voices/{id}', () => {
  test('removes the voice from the registry at once and from the provider durably', async () => {
    const c = await newCustomer(stack, 5);
    const created = await postForm(c.key, formOf([{ name: 'name', value: 'to delete' }, sample()]));
    const voice = created.body;
    const del = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${voice.id}`, { token: c.key });
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.deepEqual(del.body, { id: voice.id, object: 'voice', deleted: true });
    assertError(await http(stack.baseUrl, 'GET', `/v2/audio/voices/${voice.id}`, { token: c.key }), 404, 'voice_not_found', 'id');
    assertError(await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${voice.id}`, { token: c.key }), 404, 'voice_not_found', 'id');
    const result = await stack.api.temporal.workflow.getHandle(voiceDeletionWorkflowId(voice.id)).result();
    assert.deepEqual(result, { registry_id: voice.id, voice_id: voice.voice_id, provider_deleted: true });
    assert.equal(await sim.hasVoice(voice.voice_id), false);
    const row = await stack.db.query('SELECT deleted_at IS NOT NULL AS deleted, provider_deleted_at IS NOT NULL AS provider_deleted FROM voices WHERE id = $1', [
      voice.id,
    ]);
    assert.deepEqual(row.rows[0], { deleted: true, provider_deleted: true });
  });

  test('the provider-side deletion is retried until it succeeds', async () => {
    const c = await newCustomer(stack, 5);
    const created = await postForm(c.key, formOf([{ name: 'name', value: 'flaky provider' }, sample()]));
    const voice = created.body;
    await sim.injectFaults('delete', { kind: 'unavailable', count: 2 });
    const del = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${voice.id}`, { token: c.key });
    assert.equal(del.status, 200, 'the client does not wait for the provider');
    assertError(await http(stack.baseUrl, 'GET', `/v2/audio/voices/${voice.id}`, { token: c.key }), 404, 'voice_not_found', 'id');
    const handle = stack.api.temporal.workflow.getHandle(voiceDeletionWorkflowId(voice.id));
    const result = await handle.result();
    assert.equal(result.provider_deleted, true);
    assert.equal(await sim.pendingFaults('delete'), 0, 'every injected failure was met');
    assert.equal(await sim.hasVoice(voice.voice_id), false);
    // one activity, run 3 times: 2 failures, then success
    const history = await handle.fetchHistory();
    const attempts = (history.events ?? []).map((e) => e.activityTaskStartedEventAttributes?.attempt).filter((a) => a != null);
    assert.deepEqual(attempts, [3]);
    assert.equal((await handle.describe()).status.name, 'COMPLETED');
  });

  test('a deletion workflow for a voice the registry still holds live completes without deleting it at the provider', async () => {
    const c = await newCustomer(stack, 5);
    const created = await postForm(c.key, formOf([{ name: 'name', value: 'still live' }, sample()]));
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const voice = created.body;
    // as if the DELETE that started it had not committed (its own registry id), and for the id of
    // another live registry row (a registry id that is not the voice's)
    for (const registry_id of [voice.id, randomUUID()]) {
      const handle = await stack.api.temporal.workflow.start('voiceDeletionWorkflow', {
        workflowId: voiceDeletionWorkflowId(registry_id),
        taskQueue: stack.config.temporal.taskQueue,
        args: [{ registry_id, workspace_id: c.workspaceId, provider: 'simulator', voice_id: voice.voice_id }],
      });
      await handle.result();
      assert.equal((await handle.describe()).status.name, 'COMPLETED');
      assert.equal(await sim.hasVoice(voice.voice_id), true, 'not deleted at the provider');
    }
    const row = await stack.db.query('SELECT deleted_at IS NOT NULL AS deleted, provider_deleted_at IS NOT NULL AS provider_deleted FROM voices WHERE id = $1', [
      voice.id,
    ]);
    assert.deepEqual(row.rows[0], { deleted: false, provider_deleted: false });
    const got = await http(stack.baseUrl, 'GET', `/v2/audio/voices/${voice.id}`, { token: c.key });
    assert.equal(got.status, 200, JSON.stringify(got.body));
    const speech = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'still here', voice: voice.voice_id }),
    });
    const audio = Buffer.from(await speech.arrayBuffer());
    assert.equal(speech.status, 200, audio.toString());
    assert.ok(audio.length > 44, 'audio came back');
  });
});

describe('VOICE_PROVIDER=none', () => {
  let none: Stack;
  before(async () => {
    none = await startStack({ env: { VOICE_PROVIDER: 'none' }, worker: false });
  });
  after(async () => {
    await none?.stop();
  });

  test('every voice operation answers 503: the third-party voice provider is not configured', async () => {
    const token = (await newCustomer(none, 5)).key;
    const fd = formOf([{ name: 'name', value: 'v' }, sample()]);
    const clone = await fetch(`${none.baseUrl}/v2/audio/voices`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: fd });
    const responses = [
      { status: clone.status, body: await clone.json() },
      await http(none.baseUrl, 'GET', '/v2/audio/voices', { token }),
      await http(none.baseUrl, 'GET', '/v2/audio/voices/00000000-0000-4000-8000-000000000000', { token }),
      await http(none.baseUrl, 'DELETE', '/v2/audio/voices/00000000-0000-4000-8000-000000000000', { token }),
      await http(none.baseUrl, 'POST', '/v2/audio/speech', { token, json: { input: 'hello', voice: 'sim-narrator' } }),
      await http(none.baseUrl, 'POST', '/v2/audio/speech', { token, json: { nonsense: true } }),
    ];
    for (const r of responses) {
      assert.equal(r.status, 503, JSON.stringify(r.body));
      assert.deepEqual(r.body.error, { type: 'provider_error', code: 'provider_not_configured', message: 'the third-party voice provider is not configured', param: null });
    }
    // authentication still comes first
    const anon = await http(none.baseUrl, 'GET', '/v2/audio/voices');
    assert.equal(anon.status, 401);
  });
});

describe('voice deletion while Temporal does not answer', () => {
  test('deletes neither wait on Temporal inside a transaction nor hold the pool: answered within the deadline, started later by the reconciler', async () => {
    const c = await newCustomer(stack, 5);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await postForm(c.key, formOf([{ name: 'name', value: `doomed ${i}` }, sample()]));
      assert.equal(r.status, 200, JSON.stringify(r.body));
      ids.push(r.body.id);
    }
    // A Temporal frontend that accepts connections and never answers (an outage behind a load balancer).
    const sockets = new Set<net.Socket>();
    const blackhole = net.createServer((sock) => void sockets.add(sock));
    await new Promise<void>((r) => blackhole.listen(0, '127.0.0.1', r));
    const port = (blackhole.address() as net.AddressInfo).port;
    const dead = new Client({ connection: Connection.lazy({ address: `127.0.0.1:${port}` }) });
    const pool = createPool(stack.env['DATABASE_URL']!, 2);
    try {
      const voices = new VoicesService({ db: pool, provider: sim, temporal: dead, taskQueue: stack.config.temporal.taskQueue, logger: createLogger('silent', 'test') });
      const principal = { key_id: randomUUID(), workspace_id: c.workspaceId, models: null };
      const started = Date.now();
      const deleting = Promise.all(ids.map((id) => voices.delete(principal, id)));
      await new Promise((r) => setTimeout(r, 500));
      // Meanwhile the pool serves other requests at once (no connection waits inside a transaction).
      const probe = Date.now();
      await pool.query('SELECT 1');
      assert.ok(Date.now() - probe < 1_000, `the pool waited ${Date.now() - probe} ms`);
      assert.deepEqual(await deleting, ids.map((id) => ({ id })));
      assert.ok(Date.now() - started < 12_000, `deletes took ${Date.now() - started} ms`);
    } finally {
      await pool.end();
      for (const s of sockets) s.destroy();
      blackhole.close();
      await dead.connection.close().catch(() => {});
    }
    const marked = await stack.db.query('SELECT count(*)::int AS n FROM voices WHERE id = ANY($1::uuid[]) AND deleted_at IS NOT NULL AND provider_deleted_at IS NULL', [ids]);
    assert.equal(marked.rows[0].n, 3, 'gone from the registry, not yet from the provider');
    // The reconciler starts the deletions that could not be started.
    await stack.db.query("UPDATE voices SET deleted_at = deleted_at - interval '1 minute' WHERE id = ANY($1::uuid[])", [ids]);
    const activities = createReconcilerActivities({ db: stack.db, logger: createLogger('silent', 'test'), taskQueue: stack.config.temporal.taskQueue, video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 } });
    const report = (await new MockActivityEnvironment(undefined, { client: stack.api.temporal }).run(activities.reconcileMoney)) as ReconcileReport;
    assert.ok(report.voice_deletions_started >= 3, JSON.stringify(report));
    for (const id of ids) await stack.api.temporal.workflow.getHandle(voiceDeletionWorkflowId(id)).result();
    const done = await stack.db.query('SELECT count(*)::int AS n FROM voices WHERE id = ANY($1::uuid[]) AND provider_deleted_at IS NOT NULL', [ids]);
    assert.equal(done.rows[0].n, 3);
  });
});

describe('uploads per key', () => {
  test('one API key holds at most its share of the upload slots (429 too_many_concurrent_uploads): other keys still upload', async () => {
    const hog = await newCustomer(stack, 5);
    const body = rawMultipart([{ name: 'name', value: 'v' }, { name: 'file', file: wavOfSize(MiB), filename: 'a.wav' }]);
    const hanging = Array.from({ length: LARGE_BODIES_PER_KEY_MAX }, () => {
      const req = uploadRequest(hog.key, body);
      req.on('error', () => {});
      req.write(body.subarray(0, 64 * 1024)); // and never the rest
      return req;
    });
    try {
      await new Promise((res) => setTimeout(res, 300));
      const more = await postForm(hog.key, formOf([{ name: 'name', value: 'third' }, sample()]));
      assertError(more, 429, 'too_many_concurrent_uploads', null);
      const other = await newCustomer(stack, 5);
      const ok = await postForm(other.key, formOf([{ name: 'name', value: 'mine' }, sample()]));
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
    } finally {
      for (const req of hanging) req.destroy();
    }
  });
});
