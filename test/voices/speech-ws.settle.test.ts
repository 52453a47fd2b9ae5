// A speech socket's money statements under contention: a context's hold (holdSpeechContext) and its
// settlement (settleSpokenSpeech, the capture as one statement) racing each other, a release and the
// reconciler's way of settling (without the workspace) on the same requests of one workspace, while more
// holds are taken on it. Each request ends settled once (charged what was spoken, the rest released, or
// released whole), none charged twice, no deadlock, the key's spend and the workspace's hold agree, and
// the ledger audit holds.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { assertAuditHolds, balanceMicro, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { holdSpeechContext, releaseSpeech, settleSpokenSpeech } from '../../src/voices/speech-billing.js';
import { heldMicro, speechRows } from './speech-ws-setup.js';

let stack: Stack;
before(async () => {
  stack = await startStack({ worker: false });
});
after(async () => {
  await stack.stop();
});

// sim-speech-1: 150 micro-euros per character.
const PER_CHAR = 150;

async function hold(workspaceId: string, apiKeyId: string, characters: number): Promise<string> {
  const speechRequestId = randomUUID();
  const held = await holdSpeechContext(stack.db, {
    speechRequestId,
    workspaceId,
    idempotencyKey: `websocket:${speechRequestId}`,
    requestFingerprint: 'websocket',
    model: 'sim-speech-1',
    voice: 'sim-deep',
    voiceRegistryId: null,
    characters,
    responseFormat: 'pcm',
    cost_micro_eur: characters * PER_CHAR,
    apiKeyId,
    backend: 'simulator',
  });
  assert.equal(held.kind, 'held');
  return speechRequestId;
}

test('settlements, releases and holds racing on one workspace: each request settled once, nothing charged twice', async () => {
  const { workspaceId } = await newCustomer(stack, 100);
  const before = await balanceMicro(stack, workspaceId);
  const apiKeyId = (await stack.db.query<{ id: string }>('SELECT id FROM api_keys WHERE workspace_id = $1', [workspaceId])).rows[0]!.id;
  const ids = await Promise.all(Array.from({ length: 8 }, () => hold(workspaceId, apiKeyId, 1000)));
  // 600 of each request's 1,000 characters were spoken (with audio): 600 charged, 400 released.
  const spoken = { spokenCharacters: 600, spoken_cost_micro_eur: 600 * PER_CHAR, audioBytes: 4_000, audioContentType: 'audio/pcm' };
  // And holds taken meanwhile on the same workspace (its row's lock), left held.
  const [outcomes, later] = await Promise.all([
    Promise.all(
      ids.flatMap((speechRequestId) => [
        settleSpokenSpeech(stack.db, { speechRequestId, workspaceId, ...spoken }),
        settleSpokenSpeech(stack.db, { speechRequestId, workspaceId, ...spoken }),
        settleSpokenSpeech(stack.db, { speechRequestId, ...spoken }),
        releaseSpeech(stack.db, speechRequestId).then((released) => ({ status: released ? 'released' : 'not_held' })),
      ]),
    ),
    Promise.all(Array.from({ length: 4 }, () => hold(workspaceId, apiKeyId, 100))),
  ]);

  const rows = await speechRows(stack, workspaceId);
  let charged = 0;
  for (const [i, id] of ids.entries()) {
    const mine = outcomes.slice(i * 4, i * 4 + 4).map((o) => o.status);
    const settledBy = mine.filter((s) => s !== 'not_held');
    assert.equal(settledBy.length, 1, `request ${i} settled once (${mine.join(', ')})`);
    const row = rows.find((r) => r.id === id)!;
    if (settledBy[0] === 'captured') {
      assert.deepEqual(
        [row.status, row.characters, row.charges, row.charged_micro_eur, Number(row.audio_bytes)],
        ['delivered', 600, 1, 600 * PER_CHAR, 4_000],
      );
      charged += 600 * PER_CHAR;
    } else {
      assert.deepEqual([row.status, row.charges], ['released', 0]);
    }
  }
  assert.ok(charged > 0, 'some requests were captured');
  const stillHeld = later.length * 100 * PER_CHAR;
  assert.equal(await heldMicro(stack, workspaceId), stillHeld);
  assert.equal(await balanceMicro(stack, workspaceId), before - charged);
  const spent = Number((await stack.db.query('SELECT spent_micro_eur FROM api_keys WHERE id = $1', [apiKeyId])).rows[0]!.spent_micro_eur);
  assert.equal(spent, charged + stillHeld, "the key's spend: what was charged and what is still held");
  await Promise.all(later.map((id) => releaseSpeech(stack.db, id)));
  await assertAuditHolds(stack);
});
