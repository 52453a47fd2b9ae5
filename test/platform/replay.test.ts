// Replays every recorded history of every supported release (test/histories/<version>/) with the current
// workflow code. A change that would break a running job of a supported release (non-determinism) fails
// here. docs/architecture.md, "Changing a workflow", says how a change ships.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Worker } from '@temporalio/worker';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { installTemporalRuntime, workflowsPath } from '../../src/temporal/worker.js';
import { historyFiles, releaseOf, SUPPORTED_RELEASES } from '../helpers/histories.js';
import { tracingReplayOptions } from '../../src/telemetry/index.js';

/** Every path a release records (npm run record-histories): each outcome a job, a delivery or a reconciler run can have. */
const PATHS_SINCE_1_0_0 = [
  'video-job-succeeded',
  'video-job-shortfall',
  'video-job-provider-failed',
  'video-job-no-videos',
  'video-job-idempotent-retry',
  'video-job-deadline',
  'video-job-inputs',
  'video-job-partial-storage',
  'video-job-insufficient-credits',
  'video-job-key-spend-limit',
  'video-job-too-many-pending',
  'video-job-not-accepted',
  'video-job-late-run-charged',
  'video-job-duplicate-attempt',
  'video-job-submit-rejected',
  'video-job-cancelled',
  'video-job-cancelled-billed',
  'video-job-workflow-cancelled',
  'video-job-recovered',
  'video-job-recovered-refunded',
  'reconcile-run',
  'webhook-delivery-after-retries',
  'webhook-delivery-given-up',
  'batch-completed',
  'batch-cancelled',
  'video-job-of-batch',
];

const REQUIRED: Record<string, string[]> = { '1.0.0': PATHS_SINCE_1_0_0 };

const files = historyFiles();

test('the recorded releases are the supported ones, each with every path', () => {
  assert.deepEqual(
    [...new Set(files.map(releaseOf))].sort(),
    [...SUPPORTED_RELEASES].sort(),
    'a release out of the window keeps no recordings',
  );
  const names = new Set(
    files.map(
      (f) =>
        `${releaseOf(f)}/${f
          .split('/')
          .pop()!
          .replace(/\.json$/, '')}`,
    ),
  );
  for (const release of SUPPORTED_RELEASES) {
    for (const p of REQUIRED[release] ?? assert.fail(`no required paths listed for ${release}`))
      assert.ok(names.has(`${release}/${p}`), `missing test/histories/${release}/${p}.json`);
  }
});

// A worker with tracing on runs the workflows with the OpenTelemetry workflow interceptors (they add
// headers to the activities they schedule and export spans through a sink, no command): the histories
// replay with them too, whether they were recorded with tracing or without.
for (const traced of [false, true]) {
  test(`every recorded history of every supported release replays with the current workflow code${traced ? ', with the tracing workflow interceptors' : ''}`, async () => {
    installTemporalRuntime();
    const histories = files.map((f) => ({ workflowId: f, history: historyFromJSON(JSON.parse(fs.readFileSync(f, 'utf8'))) }));
    const failures: string[] = [];
    let replayed = 0;
    const options = {
      workflowsPath: workflowsPath(),
      replayName: traced ? 'ci-replay-traced' : 'ci-replay',
      ...(traced ? tracingReplayOptions() : {}),
    };
    for await (const result of Worker.runReplayHistories(options, histories)) {
      replayed++;
      if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
    }
    assert.equal(replayed, files.length);
    assert.ok(replayed >= PATHS_SINCE_1_0_0.length);
    assert.deepEqual(failures, []);
  });
}
