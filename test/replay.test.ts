// Replays the committed histories of every workflow path with the current workflow code. A change
// that would break running jobs (non-determinism) fails here. Regenerate with `npm run record-histories`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { installTemporalRuntime, workflowsPath } from '../src/temporal/worker.js';

const DIR = path.join('test', 'histories');
const REQUIRED = [
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
  'webhook-delivery-after-retries',
  'webhook-delivery-given-up',
];

const files = fs.readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();

test('a history is committed for every workflow path', () => {
  const names = new Set(files.map((f) => f.replace(/\.json$/, '')));
  for (const r of REQUIRED) assert.ok(names.has(r), `missing test/histories/${r}.json`);
});

test('every committed history replays with the current workflow code', async () => {
  installTemporalRuntime();
  const histories = files.map((f) => ({
    workflowId: f,
    history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(DIR, f), 'utf8'))),
  }));
  const failures: string[] = [];
  let replayed = 0;
  for await (const result of Worker.runReplayHistories({ workflowsPath: workflowsPath(), replayName: 'ci-replay' }, histories)) {
    replayed++;
    if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
  }
  assert.equal(replayed, files.length);
  assert.deepEqual(failures, []);
});
