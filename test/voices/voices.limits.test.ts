// Voice cloning limits: files per clone, bytes per file and per request, uploads held in memory,
// uploads per key, clones per workspace and credit.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import nodeHttp from 'node:http';
import { http, newCustomer } from '../helpers/stack.js';
import { DEFAULT_VOICE_CLONES_PER_WORKSPACE } from '../../src/voices/service.js';
import { LARGE_BODIES_PER_KEY_MAX } from '../../src/http/in-flight.js';
import {
  stack,
  MiB,
  wavOfSize,
  formOf,
  postForm,
  rawMultipart,
  sample,
  registryCount,
  uploadRequest,
  assertError,
  useVoicesStack,
} from './setup.js';

useVoicesStack();

describe('POST /v2/audio/voices', () => {
  test('up to the limits exactly is accepted: 10 files, a 100-character name', async () => {
    const c = await newCustomer(stack, 5);
    const files = Array.from({ length: 10 }, (_, i) => sample(`s${i}.wav`, 0.05));
    const res = await postForm(c.key, formOf([{ name: 'name', value: 'x'.repeat(100) }, ...files]));
    assert.equal(res.status, 200, JSON.stringify(res.body));
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
    const res = await postForm(
      c.key,
      formOf([
        { name: 'name', value: 'v' },
        { name: 'file', file: wavOfSize(10 * MiB + 1), filename: 'big.wav' },
      ]),
    );
    assertError(res, 413, 'file_too_large', 'file');
    assert.match(res.body.error.message, /big\.wav/);
    assert.match(res.body.error.message, /10 MiB/);
    const exact = await postForm(
      c.key,
      formOf([
        { name: 'name', value: 'v' },
        { name: 'file', file: wavOfSize(10 * MiB), filename: 'max.wav' },
      ]),
    );
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

  test('at most 8 uploads are held in memory at once: the 9th is a 503 server_busy, and the slots come back', async () => {
    const c = await newCustomer(stack, 5);
    // One key holds at most LARGE_BODIES_PER_KEY_MAX uploads at once: the hanging ones come from several keys.
    const holders = await Promise.all(Array.from({ length: 8 / LARGE_BODIES_PER_KEY_MAX }, () => newCustomer(stack, 5)));
    let opened = 0;
    const body = rawMultipart([
      { name: 'name', value: 'v' },
      { name: 'file', file: wavOfSize(MiB), filename: 'a.wav' },
    ]);
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

  test("a workspace without credit clones no voice (402): it cannot take the shared provider account's voice slots", async () => {
    const c = await newCustomer(stack, 0);
    const before = await stack.db.query('SELECT count(*)::int AS n FROM simulator.voices');
    const r = await postForm(c.key, formOf([{ name: 'name', value: 'free ride' }, sample()]));
    assertError(r, 402, 'insufficient_credits', null);
    const after = await stack.db.query('SELECT count(*)::int AS n FROM simulator.voices');
    assert.equal(after.rows[0].n, before.rows[0].n, 'the provider was not asked');
    assert.equal((await stack.db.query('SELECT count(*)::int AS n FROM voices WHERE workspace_id = $1', [c.workspaceId])).rows[0].n, 0);
  });
});

describe('uploads per key', () => {
  test('one API key holds at most its share of the upload slots (429 too_many_concurrent_uploads): other keys still upload', async () => {
    const hog = await newCustomer(stack, 5);
    const body = rawMultipart([
      { name: 'name', value: 'v' },
      { name: 'file', file: wavOfSize(MiB), filename: 'a.wav' },
    ]);
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
