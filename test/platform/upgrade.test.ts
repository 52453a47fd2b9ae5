// A job started by the workers of the previous supported release and finished by this code's: the
// rolling upgrade docs/architecture.md's "Changing a workflow" describes. The previous release's workflow code is the
// tree of the commit that recorded its histories (test/histories/<version>/); while this release is the
// only one supported, that is this release's own recording commit.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import {
  bundlePreviousRelease,
  PREVIOUS_RELEASE as previous,
  previousReleaseCommit as releaseCommit,
} from '../helpers/previous-release.js';
import { startWorker, type RunningWorker } from '../../src/runtime/worker.js';
import { createLogger } from '../../src/logger.js';
import { readVideoJob } from '../../src/video-jobs/records.js';

let stack: Stack;
let oldWorker: RunningWorker | null = null;
let newWorker: RunningWorker | null = null;
let release: { code: string; cleanup(): void } | null = null;

before(async () => {
  stack = await startStack({ worker: false });
});
after(async () => {
  await oldWorker?.shutdown();
  await newWorker?.shutdown();
  await stack.stop();
  release?.cleanup();
});

test(
  `a job started on release ${previous}'s workflow code finishes on this code's, billed once`,
  { skip: releaseCommit === null && 'not a git checkout with history' },
  async () => {
    release = await bundlePreviousRelease();
    const { code } = release;
    const logger = createLogger('silent', 'upgrade');
    const workerOf = (workflowBundle?: { code: string }) =>
      startWorker({
        config: stack.config,
        db: stack.db,
        temporalAddress: stack.config.temporal.address!,
        logger,
        ...(workflowBundle ? { workflowBundle } : {}),
      });

    oldWorker = await workerOf({ code });
    const c = await newCustomer(stack, 5);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: simJob({ delay_ms: 4_000, videos: 1 }),
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    for (let i = 0; !(await readVideoJob(stack.db, created.body.id))?.operation_id; i++) {
      assert.ok(i < 250, 'the old release never submitted the job');
      await new Promise((r) => setTimeout(r, 20));
    }
    // The old release's workers stop mid-job; this code's take over (replaying the history so far).
    await oldWorker.shutdown();
    oldWorker = null;
    assert.equal((await readVideoJob(stack.db, created.body.id))!.status, 'pending');
    newWorker = await workerOf();
    const job = await waitForJob(stack, c.key, created.body.id, 60_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.cost_in_euro, 0.2);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 200_000);
    await assertAuditHolds(stack);
  },
);
