// A streamed speech whose capture fails (the database refuses the ledger entry, as in a PostgreSQL
// blip) is still charged: its capture before its last bytes go out failing, it is recorded as delivered
// before they do, its request retries the capture, and a capture that never landed is taken by the reconciler (captured, never released,
// whichever release's code asks to release it). The ledger audit after each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { captureSpeech, markSpeechDelivered, releaseSpeech } from '../../src/voices/speech-billing.js';
import { holdTenCharacters, reconcileMoney } from './setup.js';

let stack: Stack;
before(async () => {
  // No worker: the reconciler runs only when a test runs it.
  stack = await startStack({ worker: false });
  // The next `failures` speech charges are refused by the database, each attempt counted by a sequence
  // (a sequence survives the rollback of the failing transaction; a counter row would not).
  await stack.db.query(`
    CREATE TABLE test_speech_charge_faults (failures int NOT NULL);
    INSERT INTO test_speech_charge_faults VALUES (0);
    CREATE SEQUENCE test_speech_charge_attempts;
    CREATE FUNCTION test_refuse_speech_charge() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.speech_request_id IS NOT NULL
         AND nextval('test_speech_charge_attempts') <= (SELECT failures FROM test_speech_charge_faults) THEN
        RAISE EXCEPTION 'injected: the database is unavailable' USING ERRCODE = '57P01';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER test_refuse_speech_charge BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION test_refuse_speech_charge();`);
});
after(async () => {
  await stack.stop();
});

// sim-speech-1: 150 micro-euros per character.
const PER_CHAR = 150;

/** The next `failures` speech charges fail (the attempts counted from here). */
async function refuseCharges(failures: number): Promise<void> {
  await stack.db.query('SELECT setval($1, 1, false)', ['test_speech_charge_attempts']);
  await stack.db.query('UPDATE test_speech_charge_faults SET failures = $1', [failures]);
}
const chargeAttempts = async () =>
  Number(
    (await stack.db.query<{ n: string }>('SELECT last_value - CASE WHEN is_called THEN 0 ELSE 1 END AS n FROM test_speech_charge_attempts'))
      .rows[0]!.n,
  );

async function streamSpeech(key: string, input: string) {
  const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ input, voice: 'sim-deep', response_format: 'wav', stream_format: 'audio' }),
  });
  assert.equal(res.status, 200);
  const bytes = Buffer.from(await res.arrayBuffer());
  return { bytes };
}

async function waitFor(check: () => Promise<boolean>, timeout_ms: number, what: string) {
  const until = Date.now() + timeout_ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const speechRow = async (workspaceId: string) =>
  (
    await stack.db.query<{ id: string; status: string; delivered: boolean; held_at: Date | null }>(
      'SELECT id, status, delivered_at IS NOT NULL AS delivered, held_at FROM speech_requests WHERE workspace_id = $1',
      [workspaceId],
    )
  ).rows;

const reconcile = () => reconcileMoney(stack);

describe('a streamed speech whose capture fails is charged', () => {
  test('one failed capture: the request tries again and the charge lands', async () => {
    const c = await newCustomer(stack, 10);
    const input = 'A capture refused once. '.repeat(10);
    await refuseCharges(1);
    const { bytes } = await streamSpeech(c.key, input);
    assert.ok(bytes.length > 44, 'the whole audio was streamed');
    await waitFor(async () => (await balanceMicro(stack, c.workspaceId)) === 10_000_000 - input.length * PER_CHAR, 5_000, 'the charge');
    assert.ok((await chargeAttempts()) >= 2, 'the first capture was refused');
    const [row] = await speechRow(c.workspaceId);
    assert.equal(row!.status, 'delivered');
    assert.equal(row!.delivered, true);
    await refuseCharges(0);
    await assertAuditHolds(stack);
  });

  test('a whole (not streamed) speech whose capture fails once: answered and charged', async () => {
    const c = await newCustomer(stack, 10);
    const input = 'Answered in one piece. '.repeat(5);
    await refuseCharges(1);
    const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input, voice: 'sim-deep', response_format: 'wav' }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    assert.ok((await res.arrayBuffer()).byteLength > 44);
    assert.equal(await chargeAttempts(), 2, 'refused once, then charged');
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - input.length * PER_CHAR);
    await refuseCharges(0);
    await assertAuditHolds(stack);
  });

  test('a capture that keeps failing: the hold stays, marked delivered; the reconciler captures it, never releases it', async () => {
    const c = await newCustomer(stack, 10);
    const input = 'The database stays away. '.repeat(8);
    await refuseCharges(1_000);
    await streamSpeech(c.key, input);
    const [marked] = await speechRow(c.workspaceId);
    assert.equal(marked!.status, 'held');
    assert.equal(marked!.delivered, true, 'recorded as delivered before the stream ended');
    // The request gives up after its retries (one attempt before the stream ended, then one and 5 more after
    // it, about 15 s): then nothing else captures it.
    await waitFor(async () => (await chargeAttempts()) >= 7, 30_000, 'the request to stop retrying');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await chargeAttempts(), 7, 'the request stopped retrying');
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000, 'not charged yet');
    // Any code that releases holds (this release's, or one before it) leaves a delivered hold alone.
    assert.equal(await releaseSpeech(stack.db, marked!.id), false);
    await stack.db.query("UPDATE speech_requests SET status = 'released' WHERE id = $1", [marked!.id]);
    assert.equal((await speechRow(c.workspaceId))[0]!.status, 'held');
    // Past the hold's lifetime, as after a long outage: the reconciler captures it.
    await refuseCharges(0);
    await stack.db.query(
      "UPDATE speech_requests SET held_at = held_at - interval '11 minutes', delivered_at = delivered_at - interval '11 minutes' WHERE id = $1",
      [marked!.id],
    );
    const report = await reconcile();
    assert.equal(report.speech_holds_captured, 1, JSON.stringify(report));
    assert.equal(report.speech_holds_released, 0, JSON.stringify(report));
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - input.length * PER_CHAR);
    assert.equal((await speechRow(c.workspaceId))[0]!.status, 'delivered');
    assert.equal((await reconcile()).speech_holds_captured, 0, 'captured once');
    await assertAuditHolds(stack);
  });

  test('the fallback after a capture whose answer was lost: recording the delivery of a captured request changes nothing; of a released one it is refused', async () => {
    const c = await newCustomer(stack, 10);
    const delivery = (speechRequestId: string) => ({
      speechRequestId,
      audioBytes: 64,
      audioStorageKey: `speech/${speechRequestId}.wav`,
      audioContentType: 'audio/wav',
    });
    const captured = await holdTenCharacters(stack, c.workspaceId, 'captured');
    assert.equal((await captureSpeech(stack.db, delivery(captured))).captured, true);
    // The stream goes on as delivered (its last bytes go out), and the retried capture charges nothing more.
    assert.equal(await markSpeechDelivered(stack.db, delivery(captured)), true);
    assert.equal((await captureSpeech(stack.db, delivery(captured))).captured, false);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 10 * PER_CHAR);
    const released = await holdTenCharacters(stack, c.workspaceId, 'released');
    assert.equal(await releaseSpeech(stack.db, released), true);
    // Released (the reconciler took it): the stream is cut, not handed out whole.
    assert.equal(await markSpeechDelivered(stack.db, delivery(released)), false);
    const statuses = (await speechRow(c.workspaceId)).map((r) => r.status).sort();
    assert.deepEqual(statuses, ['delivered', 'released']);
    await assertAuditHolds(stack);
  });

  test('a hold whose request died before delivering anything is still released', async () => {
    const c = await newCustomer(stack, 10);
    await holdTenCharacters(stack, c.workspaceId, 'died');
    await stack.db.query("UPDATE speech_requests SET held_at = now() - interval '11 minutes' WHERE workspace_id = $1", [c.workspaceId]);
    const report = await reconcile();
    assert.equal(report.speech_holds_released, 1, JSON.stringify(report));
    assert.equal(report.speech_holds_captured, 0, JSON.stringify(report));
    assert.equal((await speechRow(c.workspaceId))[0]!.status, 'released');
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000);
    await assertAuditHolds(stack);
  });
});
