// Voice cloning end to end when all goes well: audio recognised by content, clones of several
// formats through the real HTTP server, the registry in PostgreSQL, workspace isolation, and the
// durable provider-side deletion run by a real Temporal workflow.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { http, newCustomer } from '../helpers/stack.js';
import { sniffAudio } from '../../src/media/audio-sniff.js';
import { voiceDeletionWorkflowId } from '../../workflows/voice-deletion.js';
import { stack, sim, wavFile, mp3File, oggOpusFile, formOf, postForm, sample, assertError, useVoicesStack } from './setup.js';

useVoicesStack();

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
    assert.equal(
      await sniffAudio(m4aGeneric),
      'm4a',
      'a generic major brand with an audio compatible brand (a check file-type does not make)',
    );
    // EBML header with DocType "webm"
    const webm = Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x87, 0x42, 0x82, 0x84, ...Buffer.from('webm')]);
    assert.equal(await sniffAudio(webm), 'webm');
    const id3 = Buffer.concat([Buffer.from('ID3\x04\x00\x00\x00\x00\x00\x00', 'latin1'), mp3File()]);
    assert.equal(await sniffAudio(id3), 'mp3');
    assert.equal(await sniffAudio(Buffer.from('hello, this is plain text and not audio at all')), null);
    assert.equal(await sniffAudio(Buffer.from('%PDF-1.7\n')), null);
    assert.equal(
      await sniffAudio(Buffer.from([0xff, 0xfb, 0x90, 0x64, 1, 2, 3, 4, 5, 6, 7, 8])),
      null,
      'a lone frame header is not enough',
    );
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
    assert.deepEqual(Object.keys(v).sort(), ['created', 'id', 'name', 'object', 'provider', 'requires_verification', 'voice_id']);
    assert.equal(v.provider, 'simulator', 'the default provider: the first configured');
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
    assert.deepEqual(delTheirs.body.error, {
      ...delUnknown.body.error,
      message: delUnknown.body.error.message.replace(unknownId, voice.id),
    });

    const speakTheirs = await http(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: b.key,
      json: { input: 'hello', voice: voice.voice_id },
    });
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
    const row = await stack.db.query(
      'SELECT deleted_at IS NOT NULL AS deleted, provider_deleted_at IS NOT NULL AS provider_deleted FROM voices WHERE id = $1',
      [voice.id],
    );
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
    const row = await stack.db.query(
      'SELECT deleted_at IS NOT NULL AS deleted, provider_deleted_at IS NOT NULL AS provider_deleted FROM voices WHERE id = $1',
      [voice.id],
    );
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
