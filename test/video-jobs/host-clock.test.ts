// A create on an API host whose clock is off: the job's absolute times (the acceptance deadline the charge
// checks against PostgreSQL's clock, created_at and the deadline the reconciler compares with now()) come
// from PostgreSQL's clock, so a host 20 s behind still creates jobs and one a minute ahead writes no
// future created_at. The clock itself: the offset measured in one round trip, kept for a while, and the
// last one used while PostgreSQL cannot answer.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { assertAuditHolds, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { VideoJobsService } from '../../src/video-jobs/service.js';
import { DatabaseClock } from '../../src/db/clock.js';
import { LocalStorage } from '../../src/storage/local.js';
import { authenticateApiKey, type ApiKeyPrincipal } from '../../src/account/workspaces.js';
import { CreateVideoBody } from '../../src/video-jobs/schemas.js';

let stack: Stack;
let principal: ApiKeyPrincipal;
let key: string;
before(async () => {
  // The default create timeout: its acceptance window (20 s) is what a host 20 s behind used to use up.
  stack = await startStack();
  key = (await newCustomer(stack, 100)).key;
  principal = (await authenticateApiKey(stack.db, key))!;
});
after(async () => {
  await stack.stop();
});

/** The API's create service on a host whose clock is `skew_ms` off. */
function serviceOnHostSkewedBy(skew_ms: number): VideoJobsService {
  return new VideoJobsService({
    db: stack.db,
    storage: new LocalStorage(path.join(stack.config.dataDir, 'storage')),
    temporal: stack.api.temporal,
    taskQueue: stack.config.temporal.taskQueue,
    backends: { simulator: true },
    job_timeout_ms: stack.config.video.jobTimeoutMs,
    create_timeout_ms: stack.config.video.createTimeoutMs,
    hostNow: () => Date.now() + skew_ms,
  });
}

async function rowTimes(job_id: string) {
  const { rows } = await stack.db.query(
    `SELECT extract(epoch FROM created_at) * 1000 AS created_ms, extract(epoch FROM deadline_at) * 1000 AS deadline_ms,
            extract(epoch FROM now()) * 1000 AS now_ms
       FROM video_jobs WHERE id = $1`,
    [job_id],
  );
  return { created_ms: Number(rows[0].created_ms), deadline_ms: Number(rows[0].deadline_ms), now_ms: Number(rows[0].now_ms) };
}

describe('a create on a host whose clock is off', () => {
  for (const [what, skew_ms] of [
    ['20 s behind', -20_000],
    ['a minute ahead', 60_000],
  ] as const) {
    test(`${what}: accepted and charged, its times by PostgreSQL's clock`, async () => {
      const jobs = serviceOnHostSkewedBy(skew_ms);
      const created = await jobs.create(principal, CreateVideoBody.parse(simJob({}, { n: 1 })), undefined);
      assert.equal(created.status, 'pending');
      const t = await rowTimes(created.job_id);
      assert.ok(Math.abs(t.now_ms - t.created_ms) < 5_000, `created_at ${t.created_ms - t.now_ms} ms from PostgreSQL's now()`);
      assert.ok(Math.abs(t.deadline_ms - t.created_ms - stack.config.video.jobTimeoutMs) < 1_000);
      assert.equal((await waitForJob(stack, key, created.job_id)).status, 'succeeded');
    });
  }

  test('the ledger audit holds', async () => {
    await assertAuditHolds(stack);
  });
});

describe('DatabaseClock', () => {
  test("PostgreSQL's time whatever the host's clock says; measured once per max age; the last offset while PostgreSQL is away", async () => {
    let host_ms = Date.now() - 3_600_000;
    let queries = 0;
    let down = false;
    const db = {
      query: async (text: string) => {
        queries++;
        if (down) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
        return stack.db.query(text);
      },
    };
    const clock = new DatabaseClock(db, { max_age_ms: 10_000, hostNow: () => host_ms });
    const pg_ms = async () => Number((await stack.db.query('SELECT extract(epoch FROM clock_timestamp()) * 1000 AS ms')).rows[0].ms);
    assert.ok(Math.abs((await clock.nowMs()) - (await pg_ms())) < 1_000);
    assert.equal(queries, 1);
    host_ms += 5_000;
    await clock.nowMs();
    assert.equal(queries, 1, 'a fresh offset is used as is');
    host_ms += 6_000;
    down = true;
    const offset = clock.offsetMs()!;
    assert.equal((await clock.nowMs()) - host_ms, offset, 'the last offset while PostgreSQL cannot answer');
    assert.equal(queries, 2);
    await assert.rejects(new DatabaseClock(db).nowMs(), /ECONNREFUSED/, 'no offset yet: the database error');
  });
});
