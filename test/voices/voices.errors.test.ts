// Voice cloning requests that are refused or break: missing and malformed parts, non-audio files,
// truncated and aborted uploads, keys, provider errors, no provider configured, and deletions while
// Temporal does not answer.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { voiceDeletionWorkflowId } from '../../workflows/voice-deletion.js';
import { VoicesService } from '../../src/voices/service.js';
import { VoiceProviderSet } from '../../src/providers/voice/types.js';
import net from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createPool } from '../../src/db/pool.js';
import { createLogger } from '../../src/logger.js';
import { createReconcilerActivities, type ReconcileReport } from '../../activities/reconciler.js';
import {
  stack,
  sim,
  MiB,
  wavFile,
  wavOfSize,
  formOf,
  postForm,
  BOUNDARY,
  multipartType,
  rawMultipart,
  sample,
  registryCount,
  uploadRequest,
  assertError,
  useVoicesStack,
} from './setup.js';

useVoicesStack();

describe('POST /v2/audio/voices', () => {
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
    const textFile = await postForm(
      c.key,
      formOf([
        { name: 'name', value: 'v' },
        { name: 'file', value: 'not a file' },
      ]),
    );
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
    const otherFile = await postForm(
      c.key,
      formOf([
        { name: 'name', value: 'v' },
        { name: 'audio', file: wavFile(0.1), filename: 'a.wav' },
      ]),
    );
    assertError(otherFile, 400, 'unknown_parameter', 'audio');
    const nested = await postForm(c.key, formOf([{ name: 'name[x]', value: 'v' }, sample()]));
    assert.equal(nested.status, 400, JSON.stringify(nested.body));
  });

  test('a file that is not audio, whatever its declared type or name: 415 naming file', async () => {
    const c = await newCustomer(stack, 5);
    const text = await postForm(
      c.key,
      formOf([
        { name: 'name', value: 'v' },
        sample('ok.wav'),
        { name: 'file', file: Buffer.from('just some text, honestly'.repeat(10)), filename: 'voice.wav', type: 'audio/wav' },
      ]),
    );
    assertError(text, 415, 'unsupported_file_type', 'file');
    assert.match(text.body.error.message, /voice\.wav/);
    // large enough to be refused from its head, while streaming
    const bigPdf = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(MiB, 0x20)]);
    const pdf = await postForm(
      c.key,
      formOf([
        { name: 'name', value: 'v' },
        { name: 'file', file: bigPdf, filename: 'a.mp3', type: 'audio/mpeg' },
      ]),
    );
    assertError(pdf, 415, 'unsupported_file_type', 'file');
    const empty = await postForm(
      c.key,
      formOf([
        { name: 'name', value: 'v' },
        { name: 'file', file: Buffer.alloc(0), filename: 'e.wav' },
      ]),
    );
    assertError(empty, 400, 'empty_file', 'file');
    assert.equal(await registryCount(c.workspaceId), 0);
  });

  test('malformed and truncated bodies are 4xx, never 5xx', async () => {
    const c = await newCustomer(stack, 5);
    const full = rawMultipart([{ name: 'name', value: 'v' }, sample()]);
    // no closing boundary
    const unclosed = await postForm(c.key, rawMultipart([{ name: 'name', value: 'v' }, sample()], { close: false }), {
      'content-type': multipartType,
    });
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
    const body = rawMultipart([
      { name: 'name', value: 'v' },
      { name: 'file', file: wavOfSize(2 * MiB), filename: 'a.wav' },
    ]);
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
    const clone = await fetch(`${none.baseUrl}/v2/audio/voices`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: fd,
    });
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
      assert.deepEqual(r.body.error, {
        type: 'provider_error',
        code: 'provider_not_configured',
        message: 'the third-party voice provider is not configured',
        param: null,
      });
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
      const voices = new VoicesService({
        db: pool,
        providers: new VoiceProviderSet([sim]),
        temporal: dead,
        taskQueue: stack.config.temporal.taskQueue,
        logger: createLogger('silent', 'test'),
      });
      const principal = { key_id: randomUUID(), workspace_id: c.workspaceId, models: null };
      const started = Date.now();
      const deleting = Promise.all(ids.map((id) => voices.delete(principal, id)));
      await new Promise((r) => setTimeout(r, 500));
      // Meanwhile the pool serves other requests at once (no connection waits inside a transaction).
      const probe = Date.now();
      await pool.query('SELECT 1');
      assert.ok(Date.now() - probe < 1_000, `the pool waited ${Date.now() - probe} ms`);
      assert.deepEqual(
        await deleting,
        ids.map((id) => ({ id })),
      );
      assert.ok(Date.now() - started < 12_000, `deletes took ${Date.now() - started} ms`);
    } finally {
      await pool.end();
      for (const s of sockets) s.destroy();
      blackhole.close();
      await dead.connection.close().catch(() => {});
    }
    const marked = await stack.db.query(
      'SELECT count(*)::int AS n FROM voices WHERE id = ANY($1::uuid[]) AND deleted_at IS NOT NULL AND provider_deleted_at IS NULL',
      [ids],
    );
    assert.equal(marked.rows[0].n, 3, 'gone from the registry, not yet from the provider');
    // The reconciler starts the deletions that could not be started.
    await stack.db.query("UPDATE voices SET deleted_at = deleted_at - interval '1 minute' WHERE id = ANY($1::uuid[])", [ids]);
    const activities = createReconcilerActivities({
      db: stack.db,
      logger: createLogger('silent', 'test'),
      taskQueue: stack.config.temporal.taskQueue,
      video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 },
    });
    const report = (await new MockActivityEnvironment(undefined, { client: stack.api.temporal }).run(
      activities.reconcileMoney,
    )) as ReconcileReport;
    assert.ok(report.voice_deletions_started >= 3, JSON.stringify(report));
    for (const id of ids) await stack.api.temporal.workflow.getHandle(voiceDeletionWorkflowId(id)).result();
    const done = await stack.db.query(
      'SELECT count(*)::int AS n FROM voices WHERE id = ANY($1::uuid[]) AND provider_deleted_at IS NOT NULL',
      [ids],
    );
    assert.equal(done.rows[0].n, 3);
  });
});
