// The console's Usage screen in a real browser (the system's Chromium through playwright-core) against
// the real service: video jobs (succeeded, failed, a shortfall) and speech, of two models from two API
// keys of one workspace; "Cost by day" draws a stack of bars per model, "Usage by key" shows each key's
// figures as the jobs and the speech themselves state them, the range and grouping live in the URL (a
// reload keeps them), "Download CSV" saves the API's CSV of that range and grouping, a range without
// requests and a refused range are said so. The browser logs no error but the refusal asked for, and no
// Content-Security-Policy violation. Skipped, saying so, where /usr/bin/chromium is not installed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { CHROMIUM_PATH, chromiumInstalled, launchChromium, signIn } from '../helpers/browser.js';
import { ADMIN_TOKEN, assertAuditHolds, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';

const skip = chromiumInstalled()
  ? false
  : `no Chromium at ${CHROMIUM_PATH}: the console's browser tests need Debian's chromium package (as root: apt-get update && apt-get install -y chromium)`;
if (skip) process.stderr.write(`console-usage.test.ts skipped: ${skip}\n`);

const exact = { exact: true } as const;
const DAY_S = 86_400;
const EURO = new Intl.NumberFormat('en-IE', { style: 'currency', currency: 'EUR', minimumFractionDigits: 2, maximumFractionDigits: 6 });
const micro = (eur: number) => Math.round(eur * 1_000_000);
const isoDay = (unix_s: number) => new Date(unix_s * 1000).toISOString().slice(0, 10);

interface Figures {
  requests: number;
  succeeded: number;
  failed: number;
  pending: number;
  charged: number;
  refunded: number;
  cost: number;
  videos: number;
  video_seconds: number;
  characters: number;
}
const zero = (): Figures => ({
  requests: 0,
  succeeded: 0,
  failed: 0,
  pending: 0,
  charged: 0,
  refunded: 0,
  cost: 0,
  videos: 0,
  video_seconds: 0,
  characters: 0,
});

describe('web console: Usage', { skip }, () => {
  let stack: Stack;
  let keys: { key: string; id: string }[];
  let browser: Browser;
  let page: Page;
  /** What each key's requests state about themselves (money in micro-euros), by key id. */
  const expected = new Map<string, Figures>();
  const browserErrors: string[] = [];

  async function video(k: { key: string; id: string }, simulate: Record<string, unknown>, extra: Record<string, unknown> = {}) {
    const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: k.key, json: simJob(simulate, extra) });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const job = await waitForJob(stack, k.key, r.body.id);
    const f = expected.get(k.id)!;
    f.requests++;
    f[job.status as 'succeeded' | 'failed']++;
    f.charged += micro(job.estimated_cost_in_euro);
    f.refunded += micro(job.refunded_in_euro);
    f.cost += micro(job.cost_in_euro);
    f.videos += job.videos.length;
    f.video_seconds += job.videos.length * job.params.durationSeconds;
  }

  async function speech(k: { key: string; id: string }, input: string) {
    const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${k.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-speech-1', input, voice: 'sim-narrator', response_format: 'wav' }),
    });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    const cost = micro(Number(res.headers.get('x-cost-in-euro')));
    assert.ok(cost > 0);
    const f = expected.get(k.id)!;
    f.requests++;
    f.succeeded++;
    f.charged += cost;
    f.cost += cost;
    f.characters += [...input].length;
  }

  before(async () => {
    stack = await startStack();
    const customer = await newCustomer(stack, 50);
    const second = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${customer.workspaceId}/api-keys`, {
      token: ADMIN_TOKEN,
      json: {},
    });
    assert.equal(second.status, 201);
    const ids = await stack.db.query<{ id: string }>('SELECT id FROM api_keys WHERE workspace_id = $1', [customer.workspaceId]);
    const firstId = ids.rows.map((r) => r.id).find((id) => id !== second.body.id)!;
    keys = [
      { key: customer.key, id: firstId },
      { key: second.body.key as string, id: second.body.id as string },
    ];
    for (const k of keys) expected.set(k.id, zero());
    const [one, two] = keys as [(typeof keys)[0], (typeof keys)[0]];
    await video(one, { outcome: 'succeed', delay_ms: 0 });
    await video(one, { outcome: 'fail', message: 'no', delay_ms: 0 }, { n: 1 });
    await video(two, { outcome: 'succeed', videos: 1, delay_ms: 0 }, { durationSeconds: 8 }); // a shortfall: 1 of 2
    await speech(one, 'Where the money went.');
    await speech(two, 'Cost by day, usage by key, and a download of it all.');

    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true })).newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') browserErrors.push(m.text());
    });
    page.on('pageerror', (e) => browserErrors.push(`uncaught: ${e.message}`));
    await signIn(page, stack.baseUrl, one.key);
  });
  after(async () => {
    await browser?.close();
    if (stack) await assertAuditHolds(stack);
    await stack?.stop();
  });

  const chart = () => page.getByRole('region', { name: 'Cost by day', exact: true });
  const hashParams = async () => new URLSearchParams((await page.evaluate(() => location.hash)).split('?')[1] ?? '');
  /** The names in the chart's legend, once it shows `count` of them. */
  async function legend(count: number): Promise<string[]> {
    const items = chart().locator('.recharts-legend-item-text');
    await page.waitForFunction((n) => document.querySelectorAll('.recharts-legend-item-text').length === n, count);
    return (await items.allTextContents()).sort();
  }

  test('the Usage link opens the last 30 days by model, the address saying so', async () => {
    await page.getByRole('link', { name: 'Usage', exact: true }).click();
    await chart().waitFor();
    assert.deepEqual(Object.fromEntries(await hashParams()), { range: '30d', group_by: 'model' });
    assert.equal(await page.getByLabel('Range', exact).inputValue(), '30d');
    assert.equal(await page.getByLabel('Group by', exact).inputValue(), 'model');
    assert.equal(await page.title(), 'Usage - Console');
  });

  test('Cost by day: a stack of SVG bars per model, in the legend by name; the requests and outcomes', async () => {
    assert.deepEqual(await legend(2), ['sim-speech-1', 'sim-video-1']);
    const series = chart().locator('svg .recharts-bar');
    assert.equal(await series.count(), 2);
    const fills = new Set<string>();
    for (let i = 0; i < 2; i++) {
      const bars = series.nth(i).locator('path.recharts-rectangle');
      assert.ok((await bars.count()) >= 1, `series ${i} has a bar`);
      const box = await bars.first().boundingBox();
      assert.ok(box && box.height > 0 && box.width > 0, `series ${i}'s bar is drawn: ${JSON.stringify(box)}`);
      fills.add((await bars.first().getAttribute('fill')) ?? '');
    }
    assert.equal(fills.size, 2, 'each model its own colour');
    // 30 days, one bar slot each: the axis starts 29 days before today (UTC).
    const all = [...expected.values()];
    const sum = (f: keyof Figures) => all.reduce((s, x) => s + x[f], 0);
    for (const [label, value] of [
      ['Requests', sum('requests')],
      ['Succeeded', sum('succeeded')],
      ['Failed', sum('failed')],
      ['Pending', 0],
    ] as const)
      assert.equal(await page.getByLabel(label, exact).textContent(), String(value), label);
    assert.equal(sum('requests'), 5);
    assert.equal(await page.getByLabel('Cost', exact).textContent(), EURO.format(sum('cost') / 1e6));
  });

  test("Usage by key: each key's requests, outcomes, money and output, as its jobs and speech state them", async () => {
    const table = page.getByRole('table', { name: 'Usage by key', exact: true });
    await table.waitFor();
    for (const [id, f] of expected) {
      const row = table.locator(`tr[data-api-key-id="${id}"]`);
      assert.equal(await row.locator('th').textContent(), id);
      const cell = (c: string) => row.locator(`td[data-column="${c}"]`).textContent();
      for (const c of ['requests', 'succeeded', 'failed', 'pending', 'videos', 'video_seconds', 'characters'] as const)
        assert.equal(await cell(c), String(f[c]), `${id} ${c}`);
      assert.equal(await cell('charged_in_euro'), EURO.format(f.charged / 1e6), `${id} charged`);
      assert.equal(await cell('refunded_in_euro'), EURO.format(f.refunded / 1e6), `${id} refunded`);
      assert.equal(await cell('cost_in_euro'), EURO.format(f.cost / 1e6), `${id} cost`);
    }
    assert.equal(await table.locator('tbody tr').count(), 2);
    const [one, two] = [...expected.values()] as [Figures, Figures];
    assert.equal(one.failed, 1);
    assert.ok(two.refunded > 0 && two.characters > 0 && one.characters > 0, 'a shortfall refunded, speech of both keys');
    const totalRequests = await table.locator('tfoot td[data-column="requests"]').textContent();
    assert.equal(totalRequests, String(one.requests + two.requests));
  });

  test('range and grouping live in the URL: a reload keeps them; Back returns to the previous view', async () => {
    await page.getByLabel('Range', exact).selectOption('7d');
    await page.getByLabel('Group by', exact).selectOption('kind');
    assert.deepEqual(await legend(2), ['speech', 'video']);
    assert.deepEqual(Object.fromEntries(await hashParams()), { range: '7d', group_by: 'kind' });
    await page.reload();
    assert.deepEqual(await legend(2), ['speech', 'video']);
    assert.equal(await page.getByLabel('Range', exact).inputValue(), '7d');
    assert.equal(await page.getByLabel('Group by', exact).inputValue(), 'kind');
    await page.goBack();
    assert.deepEqual(await legend(2), ['sim-speech-1', 'sim-video-1']);
    assert.equal(await page.getByLabel('Group by', exact).inputValue(), 'model');
    await page.goForward();
    assert.deepEqual(await legend(2), ['speech', 'video']);

    // Dates of one's own: yesterday to today, UTC.
    const today = Math.floor(Date.now() / 1000 / DAY_S) * DAY_S;
    await page.getByLabel('Range', exact).selectOption('custom');
    await page.getByLabel('From', exact).fill(isoDay(today - DAY_S));
    await page.getByLabel('To', exact).fill(isoDay(today));
    await page.waitForFunction((from) => location.hash.includes(`from=${from}`), isoDay(today - DAY_S));
    assert.deepEqual(Object.fromEntries(await hashParams()), { from: isoDay(today - DAY_S), to: isoDay(today), group_by: 'kind' });
    await page.reload();
    assert.equal(await page.getByLabel('From', exact).inputValue(), isoDay(today - DAY_S));
    assert.equal(await page.getByLabel('To', exact).inputValue(), isoDay(today));
    assert.deepEqual(await legend(2), ['speech', 'video']);
    assert.equal(await chart().locator('.recharts-xAxis .recharts-cartesian-axis-tick').count(), 2, 'a bar slot per day');
  });

  test("Download CSV saves the API's CSV of the same range and grouping", async () => {
    const today = Math.floor(Date.now() / 1000 / DAY_S) * DAY_S;
    const query = `start=${today - DAY_S}&end=${today + DAY_S}&bucket=day&group_by=kind`;
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download CSV', exact: true }).click(),
    ]);
    assert.equal(download.suggestedFilename(), `usage-${today - DAY_S}-${today + DAY_S}-day.csv`);
    const saved = fs.readFileSync((await download.path())!, 'utf8');
    const api = await fetch(`${stack.baseUrl}/v2/usage?${query}&format=csv`, { headers: { authorization: `Bearer ${keys[0]!.key}` } });
    assert.equal(api.status, 200);
    assert.equal(saved, await api.text());
    const lines = saved.trim().split('\n');
    assert.match(lines[0]!, /^start,end,kind,requests,/);
    assert.deepEqual(
      lines
        .slice(1)
        .map((l) => l.split(',')[2])
        .sort(),
      ['speech', 'video'],
    );
  });

  test('a range without requests says so; a refused range is shown in words', async () => {
    await page.getByLabel('From', exact).fill('2020-01-01');
    await page.getByLabel('To', exact).fill('2020-01-07');
    await chart().getByText('No requests in this range.').waitFor();
    await page.getByRole('region', { name: 'Usage by key', exact: true }).getByText('No requests in this range.').waitFor();
    assert.equal(await page.getByLabel('Requests', exact).textContent(), '0');
    await page.getByLabel('From', exact).fill('2020-03-01'); // after "To": the API refuses it
    await page.getByRole('alert').filter({ hasText: 'The request was refused (400' }).waitFor();
    assert.equal(await page.getByRole('table', { name: 'Usage by key', exact: true }).count(), 0);
  });

  test('on a phone: nothing wider than the screen', async () => {
    await page.getByLabel('Range', exact).selectOption('30d');
    await legend(2);
    await page.setViewportSize({ width: 375, height: 740 });
    await page.waitForTimeout(200); // the chart follows its container's width
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `the Usage screen is ${overflow} px wider than the screen`);
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  test('the browser logged no errors but the refusal asked for', () => {
    const unexpected = browserErrors.filter((e) => !/Failed to load resource: the server responded with a status of 400/.test(e));
    assert.deepEqual(unexpected, []);
  });
});
