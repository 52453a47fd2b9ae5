// Voice consent recordings are bounded per workspace, count and bytes, under a lock (racing uploads
// cannot pass either bound); deleting a consent removes its recording from the disk; the retention
// sweep removes what a crash left (a deleted consent's recording, an upload that never finished).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { assertAuditHolds, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { sweepConsentRecordings, VoiceConsentsService } from '../../src/voices/consents.js';
import { createStorage } from '../../src/runtime/storage.js';
import { encodeWav } from '../../src/media/wav.js';
import { ApiError } from '../../src/errors.js';

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
      "INSERT INTO voice_consents (id, workspace_id, name, language, recording_storage_key, recording_bytes, created_at) VALUES ('cons_0123456789abcdef01234567', $1, 'n', 'en', $2, $3, now() - interval '1 hour')",
      [c.workspaceId, orphanKey, recording.length],
    );
    // A claim in progress (just made) is left alone.
    await stack.db.query(
      "INSERT INTO voice_consents (id, workspace_id, name, language, recording_storage_key, recording_bytes) VALUES ('cons_0123456789abcdef0123456f', $1, 'n', 'en', 'consents/cons_0123456789abcdef0123456f.wav', 10)",
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
});
