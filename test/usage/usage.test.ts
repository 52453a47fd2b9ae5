// Usage (GET /v2/usage, GET /admin/v1/usage) on the real stack: jobs that succeed, fail and fall short,
// speech and a voice clone, from two API keys; the usage sums equal the jobs' cost_in_euro plus the speech
// charged, to the micro-euro, in every grouping; CSV rows equal JSON rows; ranges, buckets and groups
// refused with a 400 naming the parameter; another workspace's usage invisible; the operators' view; the
// rollups moved with a job's backend; and the ledger audit catching a rollup that drifted from the ledger.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeWav } from '../../src/media/wav.js';
import { auditLedger } from '../../src/billing/audit.js';
import { ADMIN_TOKEN, assertAuditHolds, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';

type Json = any;
let stack: Stack;
let a: { workspaceId: string; key: string; keyId: string; key2: string; key2Id: string };
let b: { workspaceId: string; key: string };
const jobs: Json[] = [];
let speechCostMicro = 0;
const SPEECH_TEXT = 'Where the money went, to the micro-euro.';
const micro = (eur: number) => Math.round(eur * 1_000_000);

async function usage(key: string, query = '', headers: Record<string, string> = {}) {
  return http(stack.baseUrl, 'GET', `/v2/usage${query}`, { token: key, headers });
}

async function create(key: string, simulate: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: key, json: simJob(simulate, extra) });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.id as string;
}

before(async () => {
  stack = await startStack();
  const first = await newCustomer(stack, 100);
  const second = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${first.workspaceId}/api-keys`, { token: ADMIN_TOKEN, json: {} });
  assert.equal(second.status, 201);
  const keys = await stack.db.query<{ id: string }>('SELECT id FROM api_keys WHERE workspace_id = $1 ORDER BY created_at, id', [
    first.workspaceId,
  ]);
  const key2Id = second.body.id as string;
  a = { ...first, keyId: keys.rows.map((r) => r.id).find((id) => id !== key2Id)!, key2: second.body.key, key2Id };
  b = await newCustomer(stack, 100);

  const ids = [
    await create(a.key, { outcome: 'succeed' }),
    await create(a.key, { outcome: 'fail', message: 'no' }),
    await create(a.key, { outcome: 'succeed', videos: 1 }), // a shortfall: 1 of 2 delivered
    await create(a.key2, { outcome: 'succeed' }, { n: 1, durationSeconds: 8 }),
    await create(b.key, { outcome: 'succeed' }),
  ];
  for (const [i, id] of ids.entries()) jobs.push(await waitForJob(stack, i === 4 ? b.key : i === 3 ? a.key2 : a.key, id));

  const form = new FormData();
  form.append('name', 'usage');
  form.append('file', new Blob([new Uint8Array(encodeWav(new Int16Array(8000), 8000))], { type: 'audio/wav' }), 'a.wav');
  const voice = await fetch(`${stack.baseUrl}/v2/audio/voices`, {
    method: 'POST',
    headers: { authorization: `Bearer ${a.key2}` },
    body: form,
  });
  assert.equal(voice.status, 200);
  const voiceId = ((await voice.json()) as { voice_id: string }).voice_id;
  const speech = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
    method: 'POST',
    headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ input: SPEECH_TEXT, voice: voiceId, response_format: 'wav' }),
  });
  assert.equal(speech.status, 200);
  await speech.arrayBuffer();
  speechCostMicro = micro(Number(speech.headers.get('x-cost-in-euro')));
  assert.ok(speechCostMicro > 0);
});
after(async () => {
  await assertAuditHolds(stack);
  await stack.stop();
});

const aJobs = () => jobs.slice(0, 4);
const sumMicro = (rows: Json[], field: string) => rows.reduce((s, r) => s + micro(r[field]), 0);
const sum = (rows: Json[], field: string) => rows.reduce((s, r) => s + (r[field] as number), 0);

describe('usage of a workspace', () => {
  test('the sums equal the jobs\u2019 costs and the speech charged, to the micro-euro, with every outcome and what was produced', async () => {
    const r = await usage(a.key);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.object, 'usage');
    assert.equal(r.body.bucket, 'day');
    assert.equal(r.body.end % 86_400, 0);
    assert.equal(r.body.start % 86_400, 0);
    const t = r.body.total;
    const jobsCost = aJobs().reduce((s, j) => s + micro(j.cost_in_euro), 0);
    const jobsRefunded = aJobs().reduce((s, j) => s + micro(j.refunded_in_euro), 0);
    assert.equal(micro(t.cost_in_euro), jobsCost + speechCostMicro);
    assert.equal(micro(t.refunded_in_euro), jobsRefunded);
    assert.equal(micro(t.charged_in_euro), jobsCost + jobsRefunded + speechCostMicro);
    assert.deepEqual(
      [t.requests, t.succeeded, t.failed, t.pending, t.videos, t.video_seconds, t.characters],
      // 4 jobs, the speech, the clone; succeeded: 3 jobs (the shortfall included), speech, clone; 2 + 1 + 1 videos
      [6, 5, 1, 0, 4, 2 * 4 + 4 + 8, SPEECH_TEXT.length],
    );
    assert.equal(sumMicro(r.body.data, 'cost_in_euro'), micro(t.cost_in_euro));
    for (const row of r.body.data) assert.equal(row.end - row.start, 86_400);
  });

  test('grouped by model, API key, kind and backend: every grouping sums to the same total', async () => {
    const total = (await usage(a.key)).body.total;
    for (const g of ['model', 'api_key', 'kind', 'backend', 'model,api_key,kind,backend', 'kind,api_key']) {
      const r = await usage(a.key, `?group_by=${g}`);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(sumMicro(r.body.data, 'cost_in_euro'), micro(total.cost_in_euro), g);
      assert.equal(sum(r.body.data, 'requests'), total.requests, g);
      for (const row of r.body.data) for (const f of g.split(',')) assert.ok((f === 'api_key' ? 'api_key_id' : f) in row, `${g}: ${f}`);
    }
    const byKind = (await usage(a.key, '?group_by=kind')).body.data;
    const kind = (k: string) => byKind.find((r: Json) => r.kind === k);
    assert.equal(kind('video').requests, 4);
    assert.equal(
      micro(kind('video').cost_in_euro),
      aJobs().reduce((s, j) => s + micro(j.cost_in_euro), 0),
    );
    assert.equal(micro(kind('speech').cost_in_euro), speechCostMicro);
    assert.equal(kind('speech').characters, SPEECH_TEXT.length);
    assert.deepEqual([kind('voice_clone').requests, kind('voice_clone').succeeded, kind('voice_clone').cost_in_euro], [1, 1, 0]);

    const byKey = (await usage(a.key, '?group_by=api_key,kind')).body.data;
    const of = (keyId: string, k: string) => byKey.find((r: Json) => r.api_key_id === keyId && r.kind === k);
    assert.equal(of(a.key2Id, 'video').requests, 1);
    assert.equal(micro(of(a.key2Id, 'video').cost_in_euro), micro(jobs[3].cost_in_euro));
    assert.equal(of(a.key2Id, 'voice_clone').requests, 1);
    assert.equal(of(a.keyId, 'video').requests, 3);
    assert.equal(of(a.keyId, 'speech').requests, 1);

    const byModel = (await usage(a.key, '?group_by=model,backend')).body.data;
    const sim = byModel.find((r: Json) => r.model === 'sim-video-1');
    assert.equal(sim.backend, 'simulator');
    assert.equal(sim.videos, 4);
    assert.equal(byModel.find((r: Json) => r.model === null).requests, 1); // the clone
  });

  test('by hour and by month: the same totals, each row its bucket', async () => {
    const day = (await usage(a.key, '?group_by=kind')).body;
    for (const bucket of ['hour', 'month']) {
      const r = await usage(a.key, `?bucket=${bucket}&group_by=kind`);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body.total, day.total);
      for (const row of r.body.data) {
        if (bucket === 'hour') assert.equal(row.end - row.start, 3600);
        else assert.equal(new Date(row.start * 1000).getUTCDate(), 1);
      }
    }
    const now = Math.floor(Date.now() / 1000);
    const none = await usage(a.key, `?start=${now - 10 * 86_400}&end=${now - 5 * 86_400}`);
    assert.equal(none.status, 200);
    assert.deepEqual([none.body.data, none.body.total.requests], [[], 0]);
  });

  test('CSV (format=csv or Accept: text/csv) answers the same rows as JSON', async () => {
    const q = '?group_by=model,api_key,kind,backend';
    const json = (await usage(a.key, q)).body;
    for (const r of [await usage(a.key, `${q}&format=csv`), await usage(a.key, q, { accept: 'text/csv' })]) {
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-type') ?? '', /^text\/csv/);
      const [header, ...lines] = (r.body as string).trimEnd().split('\r\n');
      const fields = header!.split(',');
      assert.deepEqual(fields.slice(0, 6), ['start', 'end', 'model', 'api_key_id', 'kind', 'backend']);
      assert.deepEqual(fields.slice(6), [
        'requests',
        'succeeded',
        'failed',
        'pending',
        'charged_in_euro',
        'refunded_in_euro',
        'cost_in_euro',
        'videos',
        'video_seconds',
        'characters',
      ]);
      assert.equal(lines.length, json.data.length);
      lines.forEach((line, i) => {
        const row = json.data[i];
        assert.deepEqual(
          line.split(','),
          fields.map((f) => (row[f] === null ? '' : String(row[f]))),
        );
      });
    }
    // JSON stays the default; JSON asked for is JSON.
    assert.equal((await usage(a.key, q, { accept: 'application/json, text/csv' })).body.object, 'usage');
    assert.equal((await usage(a.key, `${q}&format=json`, { accept: 'text/csv' })).body.object, 'usage');
  });

  test('bad ranges, buckets and groups: 400 naming the parameter; a range too long for its bucket names start', async () => {
    const now = Math.floor(Date.now() / 1000);
    const day = 86_400;
    const cases: [string, string][] = [
      [`?bucket=hour&start=${now - 32 * day}&end=${now}`, 'start'],
      [`?bucket=day&start=${now - 401 * day}&end=${now}`, 'start'],
      [`?bucket=month&start=${now - 3660 * day}&end=${now}`, 'start'],
      ['?bucket=week', 'bucket'],
      ['?group_by=model,colour', 'group_by'],
      ['?group_by=model,model', 'group_by'],
      ['?group_by=workspace', 'group_by'],
      ['?start=abc', 'start'],
      ['?end=-5', 'end'],
      [`?start=${now}&end=${now - 10}`, 'start'],
      ['?format=xml', 'format'],
      ['?colour=red', 'colour'],
    ];
    for (const [q, param] of cases) {
      const r = await usage(a.key, q);
      assert.equal(r.status, 400, `${q}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.param, param, q);
      assert.equal(r.body.error.type, 'invalid_request_error');
    }
    // At the bounds: accepted.
    assert.equal((await usage(a.key, `?bucket=hour&start=${now - 31 * day}&end=${now}`)).status, 200);
    assert.equal((await usage(a.key, `?bucket=day&start=${now - 400 * day}&end=${now}`)).status, 200);
    assert.equal((await usage(a.key, `?bucket=month&start=${now - 3650 * day}&end=${now}`)).status, 200);
    assert.equal((await usage('not-a-key')).status, 401);
  });

  test("another workspace's usage is invisible", async () => {
    const r = await usage(b.key, '?group_by=model,api_key,kind,backend');
    assert.equal(r.status, 200);
    assert.equal(r.body.total.requests, 1);
    assert.equal(micro(r.body.total.cost_in_euro), micro(jobs[4].cost_in_euro));
    assert.ok(r.body.data.every((row: Json) => row.api_key_id !== a.keyId && row.api_key_id !== a.key2Id));
  });
});

describe('the operators\u2019 usage', () => {
  test('one workspace as its own view, every workspace grouped by workspace, 404 for an unknown one', async () => {
    const admin = (q: string, token = ADMIN_TOKEN) => http(stack.baseUrl, 'GET', `/admin/v1/usage${q}`, { token });
    const own = (await usage(a.key, '?group_by=kind,api_key')).body;
    const seen = await admin(`?workspace_id=${a.workspaceId}&group_by=kind,api_key`);
    assert.equal(seen.status, 200, JSON.stringify(seen.body));
    assert.deepEqual(seen.body, own);
    const all = await admin('?group_by=workspace');
    assert.equal(all.status, 200);
    const ws = (id: string) => all.body.data.filter((r: Json) => r.workspace_id === id);
    assert.equal(sum(ws(a.workspaceId), 'requests'), own.total.requests);
    assert.equal(sum(ws(b.workspaceId), 'requests'), 1);
    assert.ok(all.body.total.requests >= own.total.requests + 1);
    const csv = await admin(`?group_by=workspace&format=csv&workspace_id=${b.workspaceId}`);
    assert.equal(
      (csv.body as string).split('\r\n')[0],
      'start,end,workspace_id,requests,succeeded,failed,pending,charged_in_euro,' +
        'refunded_in_euro,cost_in_euro,videos,video_seconds,characters',
    );
    const unknown = await admin('?workspace_id=00000000-0000-4000-8000-000000000000');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.param, 'workspace_id');
    assert.equal((await admin('?workspace_id=nope')).body.error.param, 'workspace_id');
    assert.equal((await admin('', 'wrong-token')).status, 401);
  });
});

describe('the rollups follow the rows and the audit checks them', () => {
  test('a job moved to another backend moves its usage in the same statement', async () => {
    const job = jobs[0];
    const byBackend = async () =>
      (
        await stack.db.query<{ backend: string; requests: number; cost_micro_eur: number }>(
          `SELECT backend, sum(requests)::int AS requests, sum(cost_micro_eur)::bigint AS cost_micro_eur FROM usage_rollups
            WHERE workspace_id = $1 AND kind = 'video' GROUP BY backend HAVING sum(requests) > 0 ORDER BY backend`,
          [a.workspaceId],
        )
      ).rows;
    const before = await byBackend();
    await stack.db.query("UPDATE video_jobs SET backend = 'fal' WHERE id = $1", [job.id]);
    try {
      assert.deepEqual(await byBackend(), [
        { backend: 'fal', requests: 1, cost_micro_eur: micro(job.cost_in_euro) },
        {
          backend: 'simulator',
          requests: 3,
          cost_micro_eur: aJobs()
            .slice(1)
            .reduce((s, j) => s + micro(j.cost_in_euro), 0),
        },
      ]);
      assert.equal((await auditLedger(stack.db)).ok, true);
    } finally {
      await stack.db.query("UPDATE video_jobs SET backend = 'simulator' WHERE id = $1", [job.id]);
    }
    assert.deepEqual(await byBackend(), before);
    const audit = await auditLedger(stack.db);
    assert.equal(audit.ok, true, JSON.stringify(audit));
  });

  test('a rollup that differs from the ledger fails the audit, naming the workspace and the row', async () => {
    const where = "workspace_id = $1 AND kind = 'speech'";
    await stack.db.query(`UPDATE usage_rollups SET cost_micro_eur = cost_micro_eur + 1 WHERE ${where}`, [a.workspaceId]);
    try {
      const audit = await auditLedger(stack.db);
      assert.equal(audit.ok, false);
      assert.deepEqual(
        audit.usage_ledger_mismatches.map((m) => m.workspace_id),
        [a.workspaceId],
      );
      assert.equal(audit.usage_row_mismatches.length, 1);
      assert.equal(audit.usage_row_mismatches[0]!.kind, 'speech');
      assert.ok(audit.usage_rows_checked > 0);
    } finally {
      await stack.db.query(`UPDATE usage_rollups SET cost_micro_eur = cost_micro_eur - 1 WHERE ${where}`, [a.workspaceId]);
    }
    assert.equal((await auditLedger(stack.db)).ok, true);
  });
});
