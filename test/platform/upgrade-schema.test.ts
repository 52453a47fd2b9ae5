// A rolling upgrade's other half: the previous supported release's API and worker, run from its own
// tree as separate processes, against the schema this code's migrations made, beside this code's API.
// What the old processes write, this code reads and settles; the money adds up (the ledger audit).
// A migration that breaks the release before it (a new NOT NULL column without a default, a renamed
// column, a function whose arguments changed) fails here.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { ADMIN_TOKEN, assertAuditHolds, balanceMicro, http, newCustomer, simJob, startStack, type Stack } from '../helpers/stack.js';
import {
  extractPreviousRelease,
  PREVIOUS_RELEASE as previous,
  previousReleaseCommit as releaseCommit,
  startPreviousReleaseProcess,
} from '../helpers/previous-release.js';
import { encodeWav } from '../../src/media/wav.js';

let stack: Stack;
let tree: { dir: string; cleanup(): void } | null = null;
const children: ChildProcess[] = [];

before(async () => {
  // This code's API (its migrations applied); no worker of this code: the previous release's runs the jobs.
  stack = await startStack({ worker: false });
});
after(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await stack.stop();
  tree?.cleanup();
});

function wav(): Buffer {
  const samples = new Int16Array(11_025);
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 330 * i) / 22_050));
  return encodeWav(samples, 22_050);
}

async function until<T>(what: () => string, timeout_ms: number, probe: () => Promise<T | null>): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const v = await probe();
    if (v !== null) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test(
  `release ${previous}'s API and worker run against this code's schema: jobs, voices and speech, read and settled by this code`,
  { skip: releaseCommit === null && 'not a git checkout with history' },
  async () => {
    tree = extractPreviousRelease();
    const worker = await startPreviousReleaseProcess(tree.dir, 'worker', stack.env);
    children.push(worker.child);
    const api = await startPreviousReleaseProcess(tree.dir, 'api', { ...stack.env, PORT: '0' });
    children.push(api.child);
    const oldApi = { baseUrl: api.url! };

    // A workspace made through the old API, used through both.
    const c = await newCustomer(oldApi, 5);
    const created = await http(oldApi.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ videos: 1 }) });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    const job = await until(
      () => `the job to finish (the old worker said: ${worker.output().slice(-3000)})`,
      60_000,
      async () => {
        const r = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.body.id}`, { token: c.key });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        return r.body.status === 'pending' ? null : r.body;
      },
    );
    assert.equal(job.status, 'succeeded', JSON.stringify(job));

    // A voice cloned and spoken through the old API: this code lists it and speaks with it.
    const fd = new FormData();
    fd.append('name', 'old release voice');
    fd.append('file', new Blob([new Uint8Array(wav())], { type: 'audio/wav' }), 'sample.wav');
    const cloned = await fetch(`${oldApi.baseUrl}/v2/audio/voices`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.key}` },
      body: fd,
    });
    const voice = (await cloned.json()) as { voice_id: string };
    assert.equal(cloned.status, 200, JSON.stringify(voice));
    const oldSpeech = await http(oldApi.baseUrl, 'POST', '/v2/audio/speech', {
      token: c.key,
      json: { input: 'spoken by the old release', voice: voice.voice_id },
    });
    assert.equal(oldSpeech.status, 200, JSON.stringify(oldSpeech.body));
    const listed = await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: c.key });
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assert.ok(JSON.stringify(listed.body).includes(voice.voice_id), JSON.stringify(listed.body));
    const newSpeech = await http(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: c.key,
      json: { input: 'spoken by this code', voice: voice.voice_id },
    });
    assert.equal(newSpeech.status, 200, JSON.stringify(newSpeech.body));

    // The old API reads what this code wrote, and the balance is the sum of both.
    const ws = await http(oldApi.baseUrl, 'GET', `/admin/v1/workspaces/${c.workspaceId}`, { token: ADMIN_TOKEN });
    assert.equal(ws.status, 200, JSON.stringify(ws.body));
    const spent = 5_000_000 - (await balanceMicro(stack, c.workspaceId));
    assert.equal(spent, job.cost_in_euro * 1_000_000 + (25 + 19) * 150, `spent ${spent}`);
    assert.equal(Math.round(ws.body.balance_in_euro * 1_000_000), 5_000_000 - spent);
    await assertAuditHolds(stack);
  },
);
