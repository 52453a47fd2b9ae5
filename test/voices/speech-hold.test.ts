// The speech hold, one statement: it holds a request's cost exactly once or not at all (the request's
// row, the key's spend and the workspace's holds together), whatever races it, and with the voice
// resolved in the same statement it holds only a voice of the provider the request was priced for.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { assertAuditHolds, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { holdSpeech, holdSpeechForVoice, releaseSpeech, type SpeechHoldRequest } from '../../src/voices/speech-billing.js';

let stack: Stack;
before(async () => {
  stack = await startStack({ worker: false });
});
after(async () => {
  await stack.stop();
});

const COST = 1_500;

async function customer(credits_in_euro = 10) {
  const c = await newCustomer(stack, credits_in_euro);
  const key = await stack.db.query<{ id: string }>('SELECT id FROM api_keys WHERE workspace_id = $1', [c.workspaceId]);
  return { workspaceId: c.workspaceId, apiKeyId: key.rows[0]!.id };
}

const request = (c: { workspaceId: string; apiKeyId: string }, idempotencyKey: string, voice = 'sim-deep'): SpeechHoldRequest => ({
  speechRequestId: randomUUID(),
  workspaceId: c.workspaceId,
  idempotencyKey,
  requestFingerprint: 'f',
  model: 'sim-speech-1',
  voice,
  voiceRegistryId: null,
  characters: 10,
  responseFormat: 'wav',
  cost_micro_eur: COST,
  apiKeyId: c.apiKeyId,
  backend: 'simulator',
});

/** What the workspace holds, what its key spent, and its speech requests' rows. */
async function state(c: { workspaceId: string; apiKeyId: string }) {
  const ws = await stack.db.query<{ held_micro_eur: number }>('SELECT held_micro_eur FROM workspaces WHERE id = $1', [c.workspaceId]);
  const key = await stack.db.query<{ spent_micro_eur: number }>('SELECT spent_micro_eur FROM api_keys WHERE id = $1', [c.apiKeyId]);
  const rows = await stack.db.query<{ status: string; voice_registry_id: string | null; cost_micro_eur: number }>(
    'SELECT status, voice_registry_id, cost_micro_eur FROM speech_requests WHERE workspace_id = $1',
    [c.workspaceId],
  );
  return { held: ws.rows[0]!.held_micro_eur, spent: key.rows[0]!.spent_micro_eur, rows: rows.rows };
}

describe('the speech hold', () => {
  test('concurrent first requests under one Idempotency-Key: one held, the others in progress; its cost held once', async () => {
    const c = await customer();
    const results = await Promise.all(Array.from({ length: 12 }, () => holdSpeech(stack.db, request(c, 'same'))));
    assert.deepEqual(results.map((r) => r.kind).sort(), ['held', ...Array.from({ length: 11 }, () => 'in_progress')].sort());
    const s = await state(c);
    assert.equal(s.held, COST);
    assert.equal(s.spent, COST);
    assert.equal(s.rows.length, 1);
    assert.equal(s.rows[0]!.status, 'held');
    const id = (results.find((r) => r.kind === 'held') as { speech_request_id: string }).speech_request_id;
    assert.equal(await releaseSpeech(stack.db, id), true);
    await assertAuditHolds(stack);
  });

  test('a released request retried concurrently under its key is held again once', async () => {
    const c = await customer();
    const first = await holdSpeech(stack.db, request(c, 'retried'));
    assert.equal(first.kind, 'held');
    const id = (first as { speech_request_id: string }).speech_request_id;
    assert.equal(await releaseSpeech(stack.db, id), true);
    assert.deepEqual(await state(c), { held: 0, spent: 0, rows: [{ status: 'released', voice_registry_id: null, cost_micro_eur: COST }] });

    const retries = await Promise.all(Array.from({ length: 12 }, () => holdSpeech(stack.db, request(c, 'retried'))));
    const held = retries.filter((r) => r.kind === 'held');
    assert.equal(held.length, 1, JSON.stringify(retries));
    assert.deepEqual((held[0] as { speech_request_id: string }).speech_request_id, id, 'the same request, held again');
    assert.ok(retries.every((r) => r.kind === 'held' || r.kind === 'in_progress'));
    assert.deepEqual(await state(c), {
      held: COST,
      spent: COST,
      rows: [{ status: 'held', voice_registry_id: null, cost_micro_eur: COST }],
    });
    await releaseSpeech(stack.db, id);
    await assertAuditHolds(stack);
  });

  test('a refusal writes nothing: the key over its limit, the balance short, a debt owed', async () => {
    const c = await customer();
    await stack.db.query('UPDATE api_keys SET spend_limit_micro_eur = $2 WHERE id = $1', [c.apiKeyId, COST - 1]);
    assert.equal((await holdSpeech(stack.db, request(c, 'over-limit'))).kind, 'key_spend_limit_exceeded');
    assert.deepEqual(await state(c), { held: 0, spent: 0, rows: [] });
    await stack.db.query('UPDATE api_keys SET spend_limit_micro_eur = NULL WHERE id = $1', [c.apiKeyId]);

    const poor = await customer(0.001); // 1,000 micro-euros, less than the cost
    assert.deepEqual(await holdSpeech(stack.db, request(poor, 'short')), { kind: 'insufficient_credits', available_micro_eur: 1_000 });
    assert.deepEqual(await state(poor), { held: 0, spent: 0, rows: [] });

    await stack.db.query('UPDATE workspaces SET owed_micro_eur = 5 WHERE id = $1', [c.workspaceId]);
    assert.deepEqual(await holdSpeech(stack.db, request(c, 'owed')), { kind: 'payment_required', owed_micro_eur: 5 });
    assert.deepEqual(await state(c), { held: 0, spent: 0, rows: [] });
    await stack.db.query('UPDATE workspaces SET owed_micro_eur = 0 WHERE id = $1', [c.workspaceId]);
  });

  test('with the voice resolved in the statement, only a voice of the priced provider is held, with its registry id', async () => {
    const c = await customer();
    const { apiKeyId: _, ...rest } = request(c, 'x');
    const ask = (idempotencyKey: string, voice: string, provider: string, preset_provider: string | null) =>
      holdSpeechForVoice(
        stack.db,
        { ...rest, speechRequestId: randomUUID(), idempotencyKey, voice, apiKeyId: c.apiKeyId, backend: provider },
        { provider, preset_provider, prefer: null },
      );
    // No voice of that id in the workspace, and not a preset: nothing held.
    assert.deepEqual(await ask('unknown', 'no-such-voice', 'simulator', null), { kind: 'voice_unresolved' });
    // A preset of another provider than the one priced for: nothing held.
    assert.deepEqual(await ask('other', 'sim-deep', 'elevenlabs', 'simulator'), { kind: 'voice_unresolved' });
    assert.deepEqual(await state(c), { held: 0, spent: 0, rows: [] });

    // The workspace's cloned voice is the provider's, whatever preset shares its id: held, its registry id recorded.
    const registry_id = randomUUID();
    await stack.db.query(`INSERT INTO voices (id, workspace_id, provider, voice_id, name) VALUES ($1, $2, 'simulator', 'cloned-1', 'v')`, [
      registry_id,
      c.workspaceId,
    ]);
    assert.deepEqual(await ask('cloned-elsewhere', 'cloned-1', 'elevenlabs', 'elevenlabs'), { kind: 'voice_unresolved' });
    assert.equal((await ask('cloned', 'cloned-1', 'simulator', null)).kind, 'held');
    assert.equal((await ask('preset', 'sim-deep', 'simulator', 'simulator')).kind, 'held');
    const s = await state(c);
    assert.equal(s.held, 2 * COST);
    assert.equal(s.spent, 2 * COST);
    assert.deepEqual(s.rows.map((r) => r.voice_registry_id).sort(), [registry_id, null].sort());

    // A deleted voice is no voice: nothing more held.
    await stack.db.query('UPDATE voices SET deleted_at = now() WHERE id = $1', [registry_id]);
    assert.deepEqual(await ask('deleted', 'cloned-1', 'simulator', null), { kind: 'voice_unresolved' });
    assert.equal((await state(c)).held, 2 * COST);
    const ids = await stack.db.query<{ id: string }>('SELECT id FROM speech_requests WHERE workspace_id = $1', [c.workspaceId]);
    for (const r of ids.rows) await releaseSpeech(stack.db, r.id);
    await assertAuditHolds(stack);
  });
});
