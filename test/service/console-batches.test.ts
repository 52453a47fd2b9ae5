// The console's Batches screen, driven in a real browser (the system's Chromium through playwright-core)
// against the real service on PostgreSQL and Temporal: a batch made through the API shows in progress,
// its progress reaches completed on its own (the screen refreshes while one runs), its money is the
// API's, its output file downloads with every request's line; another batch cancelled from the screen
// ends cancelled with its error file listing the requests never started; one made through the API while
// nothing on the screen runs still appears without a reload. Skipped, saying so, where
// /usr/bin/chromium is not installed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { Browser, Locator, Page } from 'playwright-core';
import { CHROMIUM_PATH, chromiumInstalled, launchChromium, signIn } from '../helpers/browser.js';
import { assertAuditHolds, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';

const skip = chromiumInstalled()
  ? false
  : `no Chromium at ${CHROMIUM_PATH}: the console's browser tests need Debian's chromium package (as root: apt-get update && apt-get install -y chromium)`;
if (skip) process.stderr.write(`console-batches.test.ts skipped: ${skip}\n`);

const EURO = new Intl.NumberFormat('en-IE', { style: 'currency', currency: 'EUR', minimumFractionDigits: 2, maximumFractionDigits: 6 });
const videoLine = (i: number, delay_ms: number) => ({
  custom_id: `clip-${i}`,
  method: 'POST',
  url: '/v2/videos/generations',
  body: { model: 'sim-video-1', prompt: `clip ${i}`, durationSeconds: 4, n: 1, parameters: { simulate: { delay_ms } } },
});

describe('console: Batches', { skip }, () => {
  let stack: Stack;
  let customer: { workspaceId: string; key: string };
  let browser: Browser;
  let page: Page;
  const browserErrors: string[] = [];

  before(async () => {
    // Two requests at a time, so a batch of a few keeps some waiting long enough to be cancelled.
    stack = await startStack({ env: { BATCH_CONCURRENCY: '2' } });
    customer = await newCustomer(stack, 50);
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') browserErrors.push(m.text());
    });
    page.on('pageerror', (e) => browserErrors.push(`uncaught: ${e.message}`));
    await signIn(page, stack.baseUrl, customer.key);
  });
  after(async () => {
    await browser?.close();
    if (stack) await assertAuditHolds(stack);
    await stack?.stop();
  });

  async function createBatch(requests: object[]): Promise<string> {
    const r = await http(stack.baseUrl, 'POST', '/v2/batches', { token: customer.key, json: { requests } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.id as string;
  }
  const batch = async (id: string) => (await http(stack.baseUrl, 'GET', `/v2/batches/${id}`, { token: customer.key })).body;
  const card = (id: string): Locator => page.locator(`li[data-batch-id="${id}"]`);
  async function downloaded(button: Locator): Promise<{ name: string; lines: Record<string, any>[] }> {
    const [download] = await Promise.all([page.waitForEvent('download'), button.click()]);
    const text = fs.readFileSync((await download.path())!, 'utf8');
    return {
      name: download.suggestedFilename(),
      lines: text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    };
  }

  test("a batch shows in progress, reaches completed by itself, its money the API's; its output downloads", async () => {
    const id = await createBatch([0, 1, 2].map((i) => videoLine(i, 2_000)));
    await page.getByRole('link', { name: 'Batches', exact: true }).click();
    const c = card(id);
    await c.waitFor();
    assert.equal(await c.locator('.status').textContent(), 'in progress');
    assert.equal(await c.getByRole('button', { name: 'Download output', exact: true }).count(), 0);
    // No reload: the screen polls while the batch runs.
    await c.locator('.status', { hasText: 'completed' }).waitFor({ timeout: 60_000 });
    assert.match((await c.locator('.progress-counts').textContent())!, /^3 completed · 0 failed · 0 left of 3/);
    const b = await batch(id);
    assert.equal(b.status, 'completed');
    const money = (await c.locator('.money').textContent())!;
    assert.ok(money.includes(`Reserved ${EURO.format(b.reserved_in_euro)}`), money);
    assert.ok(money.includes(`Cost ${EURO.format(b.cost_in_euro)}`), money);
    assert.ok(money.includes(`Refunded ${EURO.format(b.refunded_in_euro)}`), money);
    assert.ok(b.cost_in_euro > 0);
    assert.equal(await c.getByRole('button', { name: 'Cancel', exact: true }).count(), 0);
    assert.equal(await c.getByRole('button', { name: 'Download errors', exact: true }).count(), 0, 'no error file: nothing failed');

    const out = await downloaded(c.getByRole('button', { name: 'Download output', exact: true }));
    assert.equal(out.name, `${id}-output.jsonl`);
    assert.deepEqual(
      out.lines.map((l) => l.custom_id),
      ['clip-0', 'clip-1', 'clip-2'],
    );
    for (const l of out.lines) {
      assert.equal(l.response.status_code, 200);
      assert.equal(l.response.body.status, 'succeeded');
      assert.equal(l.error, null);
    }
  });

  test('Cancel ends a running batch cancelled; its error file lists the requests never started', async () => {
    const id = await createBatch([0, 1, 2, 3, 4, 5].map((i) => videoLine(i, 3_000)));
    await page.reload();
    const c = card(id);
    await c.getByRole('button', { name: 'Cancel', exact: true }).click();
    await c.locator('.status', { hasText: /^cancelled$/ }).waitFor({ timeout: 60_000 });
    const b = await batch(id);
    assert.equal(b.status, 'cancelled');
    assert.ok(b.request_counts.failed >= 1, JSON.stringify(b.request_counts));
    assert.ok(b.refunded_in_euro > 0);
    assert.ok((await c.locator('.money').textContent())!.includes(`Refunded ${EURO.format(b.refunded_in_euro)}`));
    const errors = await downloaded(c.getByRole('button', { name: 'Download errors', exact: true }));
    assert.equal(errors.name, `${id}-errors.jsonl`);
    assert.equal(errors.lines.length, b.request_counts.failed);
    for (const l of errors.lines) {
      assert.equal(l.response, null);
      assert.equal(l.error.code, 'batch_cancelled');
    }
    // The one finished earlier is still listed below it, completed.
    assert.equal(await page.locator('li[data-batch-id]').count(), 2);
  });

  test('a batch made through the API while every batch shown has ended appears without a reload', async () => {
    await page.waitForFunction(() =>
      [...document.querySelectorAll('li[data-batch-id] .status')].every((s) => /^(completed|cancelled)$/.test(s.textContent!)),
    );
    const id = await createBatch([videoLine(0, 0)]);
    // The screen still reads the list now and then (every 10 s) while nothing on it runs.
    await card(id).waitFor({ timeout: 30_000 });
    await card(id).locator('.status', { hasText: 'completed' }).waitFor({ timeout: 60_000 });
    assert.equal(await page.locator('li[data-batch-id]').count(), 3);
  });

  test('the browser logged no errors', () => {
    assert.deepEqual(browserErrors, []);
  });
});
