// Voice consent recordings are bounded per workspace, count and bytes, under a lock (racing uploads
// cannot pass either bound); deleting a consent removes its recording from the disk; the retention
// sweep removes what a crash left (a deleted consent's recording, an upload that never finished), never
// a consent an earlier release wrote without a claim, nor one a voice names; one row (or the whole
// sweep) failing stops neither the other rows nor the reconciler's other steps.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { assertAuditHolds, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { sweepConsentRecordings, VoiceConsentsService } from '../../src/voices/consents.js';
import { createStorage } from '../../src/runtime/storage.js';
import { encodeWav } from '../../src/media/wav.js';
import { ApiError } from '../../src/errors.js';
import { MockActivityEnvironment } from '@temporalio/testing';
import { holdTenCharacters } from './setup.js';
import { createReconcilerActivities, type ReconcileReport } from '../../activities/reconciler.js';
import { createLogger } from '../../src/logger.js';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.stop();
});

/** A WAV of `seconds` of a tone (16-bit mono, 22.05 kHz: 44,100 bytes a second). */
function wav(seconds: number): Buffer {
  const samples = new Int16Array(Math.round(22_050 * seconds));
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 330 * i) / 22_050));
  return encodeWav(samples, 22_050);
}

const storageDir = () => path.join(stack.env['DATA_DIR']!, 'storage');
const filesUnder = (dir: string): string[] => (fs.existsSync(dir) ? fs.readdirSync(dir).map((f) => path.join(dir, f)) : []);
const bytesOnDisk = (files: string[]) => files.reduce((n, f) => n + fs.statSync(f).size, 0);

async function upload(key: string, recording: Buffer) {
  const fd = new FormData();
  fd.append('name', 'owner');
  fd.append('language', 'en-US');
  fd.append('recording', new Blob([new Uint8Array(recording)], { type: 'audio/wav' }), 'consent.wav');
  const res = await fetch(`${stack.baseUrl}/v1/audio/voice_consents`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: fd,
  });
  return { status: res.status, body: (await res.json()) as { id: string; error?: { code: string } } };
}

describe('voice consent recordings', () => {
  test('racing uploads pass neither the count nor the bytes bound of the workspace', async () => {
    const c = await newCustomer(stack, 1);
    const principal = { key_id: '00000000-0000-0000-0000-000000000000', workspace_id: c.workspaceId, models: null };
    const storage = createStorage(stack.config);
    const recording = wav(1); // 44,144 bytes
    // Count: 20 racing uploads, 5 allowed.
    const byCount = new VoiceConsentsService({ db: stack.db, storage, required: false, limits: { count: 5, bytes: 100 * 1024 * 1024 } });
    const counted = await Promise.allSettled(
      Array.from({ length: 20 }, () => byCount.create(principal, { name: 'n', language: 'en', recording, extension: 'wav' })),
    );
    assert.equal(counted.filter((r) => r.status === 'fulfilled').length, 5);
    for (const r of counted)
      if (r.status === 'rejected') assert.ok(r.reason instanceof ApiError && r.reason.code === 'consent_limit_reached', String(r.reason));
    // Bytes: 20 racing uploads against room for 3 more (5 kept, 8 fit).
    const byBytes = new VoiceConsentsService({
      db: stack.db,
      storage,
      required: false,
      limits: { count: 500, bytes: 8 * recording.length },
    });
    const sized = await Promise.allSettled(
      Array.from({ length: 20 }, () => byBytes.create(principal, { name: 'n', language: 'en', recording, extension: 'wav' })),
    );
    assert.equal(sized.filter((r) => r.status === 'fulfilled').length, 3);
    for (const r of sized)
      if (r.status === 'rejected')
        assert.ok(r.reason instanceof ApiError && r.reason.code === 'consent_storage_limit_reached', String(r.reason));
    const kept = await stack.db.query<{ n: number; bytes: string }>(
      'SELECT count(*)::int AS n, sum(recording_bytes) AS bytes FROM voice_consents WHERE workspace_id = $1',
      [c.workspaceId],
    );
    assert.deepEqual([kept.rows[0]!.n, Number(kept.rows[0]!.bytes)], [8, 8 * recording.length]);
  });

  test('deleting a consent removes its recording from the disk; deleted ones stop counting', async () => {
    const c = await newCustomer(stack, 0); // no credit needed to upload, but the disk is bounded
    const before_files = new Set(filesUnder(path.join(storageDir(), 'consents')));
    const recording = wav(5); // 220 KB
    for (let i = 0; i < 20; i++) {
      const up = await upload(c.key, recording);
      assert.equal(up.status, 200, JSON.stringify(up.body));
      const res = await fetch(`${stack.baseUrl}/v1/audio/voice_consents/${up.body.id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${c.key}` },
      });
      assert.equal(res.status, 200);
    }
    const left = filesUnder(path.join(storageDir(), 'consents')).filter((f) => !before_files.has(f));
    assert.deepEqual(left, [], `${bytesOnDisk(left)} bytes left on disk`);
    const removed = await stack.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM voice_consents WHERE workspace_id = $1 AND recording_removed_at IS NOT NULL',
      [c.workspaceId],
    );
    assert.equal(removed.rows[0]!.n, 20);
    await assertAuditHolds(stack);
  });

  test("the sweep removes a deleted consent's recording that is still kept, and an upload that never finished", async () => {
    const c = await newCustomer(stack, 0);
    const storage = createStorage(stack.config);
    const recording = wav(1);
    // A consent deleted while its storage could not be reached: the recording is still there.
    const up = await upload(c.key, recording);
    assert.equal(up.status, 200);
    const key = (await stack.db.query<{ k: string }>('SELECT recording_storage_key AS k FROM voice_consents WHERE id = $1', [up.body.id]))
      .rows[0]!.k;
    await stack.db.query('UPDATE voice_consents SET deleted_at = now() WHERE id = $1', [up.body.id]);
    // An upload whose process died between its claim and its store, an hour ago.
    const orphanKey = 'consents/cons_0123456789abcdef01234567.wav';
    await storage.put(orphanKey, recording);
    await stack.db.query(
      `INSERT INTO voice_consents (id, workspace_id, name, language, recording_storage_key, recording_bytes, created_at, recording_claimed_at)
       VALUES ('cons_0123456789abcdef01234567', $1, 'n', 'en', $2, $3, now() - interval '1 hour', now() - interval '1 hour')`,
      [c.workspaceId, orphanKey, recording.length],
    );
    // A claim in progress (just made) is left alone.
    await stack.db.query(
      `INSERT INTO voice_consents (id, workspace_id, name, language, recording_storage_key, recording_bytes, recording_claimed_at)
       VALUES ('cons_0123456789abcdef0123456f', $1, 'n', 'en', 'consents/cons_0123456789abcdef0123456f.wav', 10, now())`,
      [c.workspaceId],
    );
    assert.ok(await storage.open(key));
    const swept = await sweepConsentRecordings(stack.db, storage, 15 * 60_000, 100);
    assert.ok(swept >= 2, String(swept));
    assert.equal(await storage.open(key), null, "the deleted consent's recording is removed");
    assert.equal(await storage.open(orphanKey), null, "the unfinished upload's recording is removed");
    const rows = await stack.db.query<{ id: string; removed: boolean }>(
      'SELECT id, recording_removed_at IS NOT NULL AS removed FROM voice_consents WHERE workspace_id = $1 ORDER BY id',
      [c.workspaceId],
    );
    assert.deepEqual(
      rows.rows,
      [
        { id: 'cons_0123456789abcdef0123456f', removed: false },
        { id: up.body.id, removed: true },
      ].sort((a, b) => a.id.localeCompare(b.id)),
    );
    // Nothing left to sweep.
    assert.equal(await sweepConsentRecordings(stack.db, storage, 15 * 60_000, 100), 0);
  });

  test('a consent the release before upload claims wrote is visible and kept; one a voice names is never deleted; each row fails on its own', async () => {
    const c = await newCustomer(stack, 0);
    const principal = { key_id: '00000000-0000-0000-0000-000000000000', workspace_id: c.workspaceId, models: null };
    const storage = createStorage(stack.config);
    const service = new VoiceConsentsService({ db: stack.db, storage, required: true });
    const recording = wav(1);
    // Uploaded through a pod of the release before claims: stored, then its row written as that release wrote it.
    const oldId = 'cons_00000000000000000000a001';
    const oldKey = `consents/${oldId}.wav`;
    await storage.put(oldKey, recording);
    await stack.db.query(
      'INSERT INTO voice_consents (id, workspace_id, name, language, recording_storage_key, recording_bytes) VALUES ($1, $2, $3, $4, $5, $6)',
      [oldId, c.workspaceId, 'owner', 'en-US', oldKey, recording.length],
    );
    assert.equal((await service.get(principal, oldId)).id, oldId, 'this code sees it');
    assert.equal(await service.forClone(principal, oldId), oldId, 'a clone may name it');
    assert.deepEqual(
      (await service.list(principal, { limit: 10 })).data.map((x) => x.id),
      [oldId],
    );
    // An unfinished claim a voice names anyway (written by hand: no code path does it), an hour old.
    const namedId = 'cons_00000000000000000000a002';
    await stack.db.query(
      `INSERT INTO voice_consents (id, workspace_id, name, language, recording_storage_key, recording_bytes, created_at, recording_claimed_at)
       VALUES ($1, $2, 'n', 'en', $3, 10, now() - interval '1 hour', now() - interval '1 hour')`,
      [namedId, c.workspaceId, `consents/${namedId}.wav`],
    );
    await storage.put(`consents/${namedId}.wav`, recording);
    await stack.db.query(
      `INSERT INTO voices (id, workspace_id, provider, voice_id, name, consent_id) VALUES (gen_random_uuid(), $1, 'simulator', $2, 'v', $3)`,
      [c.workspaceId, `sim-voice-${namedId}`, namedId],
    );
    // Two deleted consents; removing the first one's recording fails (its storage refuses).
    const a = await service.create(principal, { name: 'a', language: 'en', recording, extension: 'wav' });
    const b = await service.create(principal, { name: 'b', language: 'en', recording, extension: 'wav' });
    await stack.db.query('UPDATE voice_consents SET deleted_at = now() WHERE id = ANY($1)', [[a.id, b.id]]);
    const refusing = Object.create(storage) as typeof storage;
    refusing.delete = async (key: string) => {
      if (key.includes(a.id)) throw new Error('storage refused');
      return storage.delete(key);
    };
    // Long after the grace of unfinished uploads.
    await stack.db.query("UPDATE voice_consents SET created_at = created_at - interval '1 hour' WHERE id = $1", [oldId]);
    const failed: string[] = [];
    const swept = await sweepConsentRecordings(stack.db, refusing, 15 * 60_000, 100, (id) => failed.push(id));
    assert.deepEqual(failed, [a.id], 'the failing row is reported');
    assert.ok(swept >= 1, String(swept));
    const rows = await stack.db.query<{ id: string; removed: boolean; deleted: boolean }>(
      `SELECT id, recording_removed_at IS NOT NULL AS removed, deleted_at IS NOT NULL AS deleted FROM voice_consents
        WHERE workspace_id = $1 ORDER BY id`,
      [c.workspaceId],
    );
    assert.deepEqual(
      rows.rows,
      [
        { id: oldId, removed: false, deleted: false },
        { id: namedId, removed: false, deleted: false },
        { id: a.id, removed: false, deleted: true },
        { id: b.id, removed: true, deleted: true },
      ].sort((x, y) => x.id.localeCompare(y.id)),
    );
    assert.ok(await storage.open(oldKey), "the old release's recording is kept");
    assert.ok(await storage.open(`consents/${namedId}.wav`), 'the named consent keeps its recording');
    // With the storage back, the failed row goes on the next sweep.
    assert.equal(await sweepConsentRecordings(stack.db, storage, 15 * 60_000, 100), 1);
    assert.equal(await sweepConsentRecordings(stack.db, storage, 15 * 60_000, 100), 0);
  });

  test("the reconciler's run goes on when the consent sweep fails: the money steps still run", async () => {
    const c = await newCustomer(stack, 1);
    const storage = createStorage(stack.config);
    const up = await upload(c.key, wav(1));
    assert.equal(up.status, 200);
    await stack.db.query('UPDATE voice_consents SET deleted_at = now() WHERE id = $1', [up.body.id]);
    // A speech hold whose request died, past its lifetime: the money sweep's first step releases it.
    await holdTenCharacters(stack, c.workspaceId, 'died');
    await stack.db.query("UPDATE speech_requests SET held_at = now() - interval '11 minutes' WHERE workspace_id = $1", [c.workspaceId]);
    const broken = Object.create(storage) as typeof storage;
    broken.delete = async () => {
      throw new Error('storage refused');
    };
    const activities = createReconcilerActivities({
      db: stack.db,
      logger: createLogger('silent', 'test'),
      taskQueue: stack.config.temporal.taskQueue,
      video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 },
      storage: broken,
    });
    const env = new MockActivityEnvironment(undefined, { client: stack.api.temporal });
    for (let run = 0; run < 2; run++) {
      const report = (await env.run(activities.reconcileMoney)) as ReconcileReport;
      assert.equal(report.consent_recordings_removed, 0, JSON.stringify(report));
      assert.equal(report.speech_holds_released, run === 0 ? 1 : 0, JSON.stringify(report));
    }
    await assertAuditHolds(stack);
  });
});
