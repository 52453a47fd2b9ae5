// Replays every recorded history of every release (test/histories/ for the first, 0.1.0, and
// test/histories/<version>/ for each later one) with the current workflow code. A change that would
// break a running job of any released version (non-determinism) fails here. Record a new path with
// `npm run record-histories`; recordings are append-only (test/history-discipline.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { installTemporalRuntime, workflowsPath } from '../src/temporal/worker.js';
import { HISTORIES_DIR, historyFiles } from './helpers/histories.js';

/** The paths 0.2.0 recorded; each later release records them all again under its own folder. */
const PATHS_SINCE_0_2_0 = [
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
  'video-job-not-accepted',
  'video-job-duplicate-attempt',
  'video-job-submit-rejected',
  'video-job-cancelled',
  'video-job-workflow-cancelled',
  'video-job-recovered',
  'video-job-recovered-refunded',
  'video-job-continued-from-first-release',
  'reconcile-run',
  'webhook-delivery-after-retries',
  'webhook-delivery-given-up',
];

/** The paths each release must have recorded, by folder ('' = the first release's, directly in test/histories). */
const REQUIRED: Record<string, string[]> = {
  '': [
    'video-job-succeeded',
    'video-job-shortfall',
    'video-job-provider-failed',
    'video-job-no-videos',
    'video-job-idempotent-retry',
    'video-job-continued',
    'video-job-continued.run1',
    'video-job-deadline',
    'video-job-cancelled',
    'video-job-insufficient-credits',
    'video-job-submit-rejected',
    'voice-delete-succeeded',
    'voice-delete-after-retries',
    // Recorded before 0.2.0 (3ca7b49), before the release folders existed; kept where they were recorded.
    'webhook-delivery-after-retries',
    'webhook-delivery-given-up',
  ],
  '0.2.0': PATHS_SINCE_0_2_0,
  '0.3.0': PATHS_SINCE_0_2_0,
  '0.4.0': [...PATHS_SINCE_0_2_0, 'video-job-late-run-charged'],
  '0.5.0': [...PATHS_SINCE_0_2_0, 'video-job-late-run-charged', 'video-job-started-charging'],
  '0.6.0': [...PATHS_SINCE_0_2_0, 'video-job-late-run-charged', 'video-job-started-charging'],
};

/**
 * Releases no run of which can still be open (checked with `temporal workflow list` before listing one
 * here), so that a patch they needed could be deprecated: their recordings stay, no longer replayed.
 */
const RETIRED: string[] = [];

const files = historyFiles().filter((f) => !RETIRED.includes(path.relative(HISTORIES_DIR, path.dirname(f)) || '0.1.0'));

test('a history is recorded for every workflow path of every release', () => {
  const names = new Set(files.map((f) => path.relative(HISTORIES_DIR, f).replace(/\.json$/, '')));
  for (const [release, paths] of Object.entries(REQUIRED)) {
    for (const p of paths) assert.ok(names.has(path.join(release, p)), `missing ${path.join(HISTORIES_DIR, release, p)}.json`);
  }
});

test('every recorded history of every release replays with the current workflow code', async () => {
  installTemporalRuntime();
  const histories = files.map((f) => ({ workflowId: f, history: historyFromJSON(JSON.parse(fs.readFileSync(f, 'utf8'))) }));
  const failures: string[] = [];
  let replayed = 0;
  for await (const result of Worker.runReplayHistories({ workflowsPath: workflowsPath(), replayName: 'ci-replay' }, histories)) {
    replayed++;
    if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
  }
  assert.equal(replayed, files.length);
  assert.deepEqual(failures, []);
});
