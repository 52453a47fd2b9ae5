// The web console at /console, driven in a real browser (the system's Chromium through playwright-core)
// against the real service on PostgreSQL and Temporal, by the names a person using a screen reader
// hears: sign in (and a wrong key), make a video with the simulator and watch it play, a shortfall's
// refund, cancel and delete, clone a voice from a file and from the microphone, speak and play, the
// balance and statement, add a webhook (secret shown once), see its deliveries, delete it, a 402, a
// phone's width, the keyboard. The browser logs no error but the expected refusals (401, 402), and no
// Content-Security-Policy violation. Skipped, saying so, where /usr/bin/chromium is not installed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { CHROMIUM_PATH, chromiumInstalled, launchChromium, signIn } from '../helpers/browser.js';
import { assertAuditHolds, http, newCustomer, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { createHash } from 'node:crypto';
import { encodeWav } from '../../src/media/wav.js';
import { jpegImage, pngImage } from '../helpers/images.js';

const skip = chromiumInstalled()
  ? false
  : `no Chromium at ${CHROMIUM_PATH}: the console's browser tests need Debian's chromium package (as root: apt-get update && apt-get install -y chromium)`;
if (skip) process.stderr.write(`console.test.ts skipped: ${skip}\n`);

const HAVE_CURRENT_DATA = 2;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const exact = { exact: true } as const;

describe('web console', { skip }, () => {
  let stack: Stack;
  let customer: { workspaceId: string; key: string };
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let receiver: Receiver;
  /** Errors the page logged (console errors, uncaught exceptions, CSP violations). */
  const browserErrors: string[] = [];

  before(async () => {
    stack = await startStack();
    customer = await newCustomer(stack, 10);
    receiver = await startReceiver();
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.baseUrl });
    page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') browserErrors.push(m.text());
    });
    page.on('pageerror', (e) => browserErrors.push(`uncaught: ${e.message}`));
  });
  after(async () => {
    await browser?.close();
    await receiver?.close();
    if (stack) await assertAuditHolds(stack);
    await stack?.stop();
  });

  const job = (id: string) => http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: customer.key });
  /** The job at the top of the list, once it is a job other than `previousTopId`. */
  async function newTopJob(previousTopId: string | null): Promise<{ id: string; card: Locator }> {
    const top = page.locator('li[data-job-id]').first();
    await page.waitForFunction((prev) => {
      const id = document.querySelector('li[data-job-id]')?.getAttribute('data-job-id');
      return id !== undefined && id !== null && id !== prev;
    }, previousTopId);
    const id = (await top.getAttribute('data-job-id'))!;
    return { id, card: page.locator(`li[data-job-id="${id}"]`) };
  }
  const topJobId = async () =>
    (await page.locator('li[data-job-id]').count()) ? page.locator('li[data-job-id]').first().getAttribute('data-job-id') : null;

  async function generate(opts: { n: number; duration: number; simulate: string }) {
    const previous = await topJobId();
    await page.getByLabel('Model', exact).selectOption('sim-video-1');
    await page.getByLabel('Duration', exact).selectOption(String(opts.duration));
    await page.getByLabel('Number of videos', exact).selectOption(String(opts.n));
    await page.getByLabel('Simulator parameters (JSON)', exact).fill(opts.simulate);
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    return newTopJob(previous);
  }

  test('/ links to the console; its pages allow nothing inline and nothing from elsewhere', async () => {
    const landing = await fetch(`${stack.baseUrl}/`);
    assert.equal(landing.status, 200);
    assert.match(await landing.text(), /<a href="\/console">Console<\/a>/);
    const res = await fetch(`${stack.baseUrl}/console`);
    assert.equal(res.status, 200);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /style-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>|<style|style=/, 'no inline script or style');
    assert.doesNotMatch(html, /(src|href)="(https?:)?\/\//, 'nothing from another origin');
    for (const asset of ['app.js', 'app.css']) {
      const a = await fetch(`${stack.baseUrl}/console/${asset}`);
      assert.equal(a.status, 200, asset);
      assert.ok((await a.arrayBuffer()).byteLength > 1000, asset);
    }
    await page.goto(`${stack.baseUrl}/`);
    await page.getByRole('link', { name: 'Console', exact: true }).click();
    await page.getByLabel('API key', exact).waitFor();
  });

  test('a wrong key says so; the right one signs in, kept in sessionStorage, no cookie', async () => {
    await page.getByLabel('API key', exact).fill('vva_sk_not_a_real_key');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByText('Wrong API key').waitFor();
    assert.equal(await page.getByRole('link', { name: 'Sign out', exact: true }).count(), 0);

    await signIn(page, stack.baseUrl, customer.key);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('vva.apiKey')), customer.key);
    assert.deepEqual(await context.cookies(), []);
    for (const name of ['Videos', 'Voices', 'Account']) assert.equal(await page.getByRole('link', { name, exact: true }).count(), 1, name);
  });

  test('the price of what is chosen, in euros, follows the choices, before anything is spent', async () => {
    const price = page.getByLabel('Price', exact);
    await page.getByLabel('Model', exact).selectOption('sim-video-1');
    await page.getByLabel('Duration', exact).selectOption('8');
    await page.getByLabel('Resolution', exact).selectOption('720p');
    await page.getByLabel('Number of videos', exact).selectOption('2');
    await page.getByLabel('Audio', exact).check();
    assert.equal(await price.textContent(), '€0.80'); // 0.05 EUR/s x 8 s x 2
    await page.getByLabel('Audio', exact).uncheck();
    assert.equal(await price.textContent(), '€0.64'); // 0.04 EUR/s without audio
    await page.getByLabel('Resolution', exact).selectOption('1080p');
    assert.equal(await price.textContent(), '€1.28'); // 0.08 EUR/s
    // Every input the model takes is offered.
    for (const label of ['Prompt', 'Aspect ratio', 'First frame', 'Last frame', 'Negative prompt'])
      assert.equal(await page.getByLabel(label, exact).count(), 1, label);
    const balance = await http(stack.baseUrl, 'GET', '/v2/balance', { token: customer.key });
    assert.equal(balance.body.balance_in_euro, 10);
    await page.getByLabel('Resolution', exact).selectOption('720p');
    await page.getByLabel('Audio', exact).check();
  });

  test('a video made with the simulator appears at the top, then plays inline with a download link', async () => {
    const { id, card } = await generate({ n: 1, duration: 4, simulate: '{"delay_ms": 500}' });
    await card.locator('.status', { hasText: 'succeeded' }).waitFor({ timeout: 30_000 });
    const created = await job(id);
    assert.equal(created.body.status, 'succeeded');
    const video = card.locator('video[controls]');
    await video.waitFor();
    await page.waitForFunction(
      ([sel, ready]) => ((document.querySelector(sel) as HTMLVideoElement | null)?.readyState ?? -1) >= ready,
      [`li[data-job-id="${id}"] video`, HAVE_CURRENT_DATA] as const,
      { timeout: 20_000 },
    );
    const duration = await video.evaluate((v: HTMLVideoElement) => v.duration);
    assert.ok(
      Math.abs(duration - created.body.params.durationSeconds) < 0.5,
      `duration ${duration} s, job ${created.body.params.durationSeconds} s`,
    );
    const download = card.getByRole('link', { name: 'Download video 1', exact: true });
    assert.equal(await download.getAttribute('href'), await video.getAttribute('src'));
    assert.equal(await download.getAttribute('download'), `${id}-1.mp4`);
    assert.match((await card.textContent()) ?? '', /Cost €0\.20 · Refunded €0\.00/);
  });

  test('a shortfall shows its refund', async () => {
    const { id, card } = await generate({ n: 2, duration: 4, simulate: '{"videos": 1, "delay_ms": 300}' });
    await card.getByText('Refunded €0.20').waitFor({ timeout: 30_000 }); // 0.40 charged, 1 of 2 delivered
    assert.equal((await job(id)).body.refunded_in_euro, 0.2);
    assert.equal(await card.locator('video').count(), 1);
    await card.getByText('1 of 2 videos delivered').waitFor();
  });

  test('Cancel while pending refunds in full; Delete once finished removes the job', async () => {
    const { id, card } = await generate({ n: 1, duration: 4, simulate: '{"delay_ms": 600000}' });
    await card.getByRole('button', { name: 'Cancel', exact: true }).click();
    await card.locator('.status', { hasText: 'cancelled' }).waitFor({ timeout: 30_000 });
    await card.getByText('Refunded €0.20').waitFor();
    const cancelled = await job(id);
    assert.equal(cancelled.body.error.code, 'cancelled');
    assert.equal(cancelled.body.refunded_in_euro, 0.2);
    await card.getByRole('button', { name: 'Delete', exact: true }).click();
    await card.waitFor({ state: 'detached' });
    assert.equal((await job(id)).status, 404);
  });

  test('First frame, Last frame, Audio off and Negative prompt reach the provider as the API documents', async () => {
    const first = pngImage(64, 36, 7);
    const last = jpegImage(2);
    await page.getByLabel('First frame', exact).setInputFiles({ name: 'first.png', mimeType: 'image/png', buffer: first });
    await page.getByLabel('Last frame', exact).setInputFiles({ name: 'last.jpg', mimeType: 'image/jpeg', buffer: last });
    await page.getByLabel('Audio', exact).uncheck();
    await page.getByLabel('Negative prompt', exact).fill('text, people');
    await page.getByLabel('Duration', exact).selectOption('4');
    assert.equal(await page.getByLabel('Price', exact).textContent(), '€0.16'); // 0.04 EUR/s x 4 s, without audio
    const { id, card } = await generate({ n: 1, duration: 4, simulate: '{"delay_ms": 0}' });
    await card.locator('.status', { hasText: 'succeeded' }).waitFor({ timeout: 30_000 });
    assert.equal((await job(id)).body.cost_in_euro, 0.16);
    const seen = (await stack.db.query('SELECT request FROM simulator.video_operations WHERE request_id = $1', [id])).rows[0]?.request;
    assert.equal(seen.generate_audio, false);
    assert.equal(seen.negative_prompt, 'text, people');
    assert.deepEqual(seen.image, { mime_type: 'image/png', bytes: first.length, sha256: sha256(first) });
    assert.deepEqual(seen.last_frame, { mime_type: 'image/jpeg', bytes: last.length, sha256: sha256(last) });
    await page.getByLabel('First frame', exact).setInputFiles([]);
    await page.getByLabel('Last frame', exact).setInputFiles([]);
    await page.getByLabel('Negative prompt', exact).fill('');
    await page.getByLabel('Audio', exact).check();
  });

  test('the list pages through all jobs and filters by status and model', async () => {
    // 3 succeeded jobs so far; 9 more made through the API make 12, over two pages of 10.
    for (let i = 0; i < 9; i++) {
      const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
        token: customer.key,
        json: {
          prompt: `p${i}`,
          model: 'sim-video-1',
          durationSeconds: 4,
          generateAudio: false,
          parameters: { simulate: { delay_ms: 0 } },
        },
      });
      assert.equal(r.status, 202);
      await waitForJob(stack, customer.key, r.body.id);
    }
    await page.getByLabel('Filter by status', exact).selectOption('succeeded');
    await page.waitForFunction(() => document.querySelectorAll('li[data-job-id]').length === 10, undefined, { timeout: 30_000 });
    await page.getByRole('button', { name: 'Next page', exact: true }).click();
    await page.waitForFunction(() => document.querySelectorAll('li[data-job-id]').length === 2);
    await page.getByRole('button', { name: 'Previous page', exact: true }).click();
    await page.waitForFunction(() => document.querySelectorAll('li[data-job-id]').length === 10);
    await page.getByLabel('Filter by status', exact).selectOption('failed');
    await page.getByText('No jobs match these filters').waitFor(); // the cancelled job was deleted
    await page.getByLabel('Filter by status', exact).selectOption('');
    await page.getByLabel('Filter by model', exact).selectOption('veo-3.1-generate-001');
    await page.getByText('No jobs match these filters').waitFor();
    await page.getByLabel('Filter by model', exact).selectOption('');
  });

  test('Voices: clone from a file and from the microphone, speak and play with its cost, delete', async () => {
    await page.getByRole('link', { name: 'Voices', exact: true }).click();
    const wav = encodeWav(
      Int16Array.from({ length: 22_050 }, (_, i) => Math.round(8000 * Math.sin(i / 8))),
      22_050,
    );
    await page.getByLabel('Voice name', exact).fill('Console voice');
    await page.getByLabel('Voice sample', exact).setInputFiles({ name: 'me.wav', mimeType: 'audio/wav', buffer: wav });
    await page.getByRole('button', { name: 'Clone voice', exact: true }).click();
    const row = page.getByRole('row', { name: 'Voice Console voice' });
    await row.waitFor();
    const voices = await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: customer.key });
    assert.deepEqual(
      voices.body.data.map((v: { name: string }) => v.name),
      ['Console voice'],
    );
    const voiceId = voices.body.data[0].voice_id as string;

    // The browser's fake microphone (a beep) recorded for a second and cloned.
    await page.getByRole('button', { name: 'Record', exact: true }).click();
    await page.waitForTimeout(1200);
    await page.getByRole('button', { name: /^Stop recording/ }).click();
    await page.getByLabel('Your recording', exact).waitFor();
    await page.getByLabel('Voice name', exact).fill('Recorded voice');
    await page.getByRole('button', { name: 'Clone voice', exact: true }).click();
    await page.getByRole('row', { name: 'Voice Recorded voice' }).waitFor();

    // Cloned and preset voices to speak with.
    const options = await page
      .getByLabel('Voice', exact)
      .locator('option')
      .evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
    assert.ok(options.includes(voiceId) && options.includes('sim-narrator'), options.join());
    await page.getByLabel('Voice', exact).selectOption(voiceId);
    await page.getByLabel('Text', exact).fill('Hello from the console.'); // 23 characters at 0.15 EUR per 1,000
    await page.getByRole('button', { name: 'Speak', exact: true }).click();
    const audio = page.locator('audio[controls][aria-label="Speech"]');
    await audio.waitFor();
    await page.waitForFunction(
      (ready) => ((document.querySelector('audio[aria-label="Speech"]') as HTMLAudioElement | null)?.readyState ?? -1) >= ready,
      HAVE_CURRENT_DATA,
    );
    assert.ok((await audio.evaluate((a: HTMLAudioElement) => a.duration)) > 0);
    await page.getByText('Cost: €0.00345 for 23 characters.').waitFor();

    await row.getByRole('button', { name: 'Delete', exact: true }).click();
    await row.waitFor({ state: 'detached' });
    const left = await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: customer.key });
    assert.deepEqual(
      left.body.data.map((v: { name: string }) => v.name),
      ['Recorded voice'],
    );
  });

  test('Account: the balance, the low balance alert, the statement, a webhook with its secret shown once, its deliveries, delete', async () => {
    await page.getByRole('link', { name: 'Account', exact: true }).click();
    const balance = await http(stack.baseUrl, 'GET', '/v2/balance', { token: customer.key });
    const shown = page.getByLabel('Balance', exact);
    await page.waitForFunction(() => document.getElementById('balance')?.textContent?.startsWith('€'));
    assert.equal(
      await shown.textContent(),
      new Intl.NumberFormat('en-IE', { style: 'currency', currency: 'EUR', minimumFractionDigits: 2, maximumFractionDigits: 6 }).format(
        balance.body.balance_in_euro,
      ),
    );
    await page.getByRole('cell', { name: 'charge', exact: true }).first().waitFor();
    assert.equal(await page.getByRole('button', { name: 'Next page', exact: true }).isEnabled(), true); // more than 10 entries

    // The low balance alert: set, shown again from the API on the next visit, then turned off.
    const alertField = page.getByLabel('Low balance alert', exact);
    assert.equal(await alertField.inputValue(), '', 'off at first');
    const threshold = async () =>
      (await http(stack.baseUrl, 'GET', '/v2/account', { token: customer.key })).body.low_balance_threshold_in_euro;
    await alertField.fill('2.5');
    await page.getByRole('button', { name: 'Save alert', exact: true }).click();
    await page.getByText('Saved.').waitFor();
    assert.equal(await threshold(), 2.5);
    await page.getByRole('link', { name: 'Videos', exact: true }).click();
    await page.getByRole('link', { name: 'Account', exact: true }).click();
    await page.waitForFunction(() => (document.getElementById('low-balance-alert') as HTMLInputElement | null)?.value === '2.5');
    await alertField.fill('');
    await page.getByRole('button', { name: 'Save alert', exact: true }).click();
    await page.getByText('Saved.').waitFor();
    assert.equal(await threshold(), null);

    await page.getByLabel('Webhook URL', exact).fill(receiver.url);
    await page.getByRole('button', { name: 'Add webhook', exact: true }).click();
    const secret = await page.getByLabel('Signing secret', exact).inputValue();
    assert.match(secret, /^whsec_/);
    await page.getByRole('button', { name: 'Copy secret', exact: true }).click();
    await page.getByRole('button', { name: 'Copied', exact: true }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
    const endpoints = await http(stack.baseUrl, 'GET', '/v2/webhooks', { token: customer.key });
    assert.equal(endpoints.body.data.length, 1);
    assert.equal(endpoints.body.data[0].secret, undefined, 'the API never shows the secret again');

    // A finished job is delivered to it; its deliveries list says so.
    const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: customer.key,
      json: { prompt: 'hook', model: 'sim-video-1', durationSeconds: 4, parameters: { simulate: { delay_ms: 0 } } },
    });
    assert.equal(r.status, 202);
    await receiver.waitFor(1);
    const endpoint = page.getByRole('listitem', { name: `Webhook ${receiver.url}` });
    await endpoint.getByRole('button', { name: 'Deliveries', exact: true }).click();
    await endpoint.getByRole('cell', { name: 'video.generation.succeeded' }).waitFor();
    await endpoint.getByRole('button', { name: 'Delete', exact: true }).click();
    await endpoint.waitFor({ state: 'detached' });
    assert.deepEqual((await http(stack.baseUrl, 'GET', '/v2/webhooks', { token: customer.key })).body.data, []);
  });

  test('on a phone: every screen reachable, nothing wider than the screen', async () => {
    await page.setViewportSize({ width: 375, height: 740 });
    const SCREEN_BUTTON = { Videos: 'Generate', Voices: 'Clone voice', Account: 'Add webhook' };
    for (const [name, button] of Object.entries(SCREEN_BUTTON)) {
      await page.getByRole('link', { name, exact: true }).click();
      await page.getByRole('button', { name: button, exact: true }).waitFor();
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      assert.ok(overflow <= 0, `${name} is ${overflow} px wider than the screen`);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  test('keyboard: the form can be filled and sent without a mouse', async () => {
    await page.getByRole('link', { name: 'Videos', exact: true }).click();
    await page.getByLabel('Prompt', exact).focus();
    const reached: string[] = [];
    for (let i = 0; i < 30; i++) {
      await page.keyboard.press('Tab');
      const label = await page.evaluate(() => {
        const el = document.activeElement as HTMLElement | null;
        return el?.id ? (document.querySelector(`label[for="${el.id}"]`)?.textContent ?? el.textContent) : (el?.textContent ?? '');
      });
      reached.push(label ?? '');
      if (label === 'Generate') break;
    }
    for (const name of ['Model', 'Duration', 'Resolution', 'Aspect ratio', 'Number of videos', 'Audio', 'Generate'])
      assert.ok(reached.includes(name), `${name} not reached by Tab: ${reached.join(' | ')}`);
  });

  test('a 402 is shown in words; Sign out returns to the sign-in screen', async () => {
    const poor = await newCustomer(stack, 0.1);
    await page.getByRole('link', { name: 'Sign out', exact: true }).click();
    await page.getByLabel('API key', exact).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('vva.apiKey')), null);
    await page.getByLabel('API key', exact).fill(poor.key);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('link', { name: 'Videos', exact: true }).click();
    await page.getByLabel('Model', exact).selectOption('sim-video-1');
    await page.getByLabel('Duration', exact).selectOption('8');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await page.getByRole('alert').filter({ hasText: 'Not enough credits (402 insufficient_credits)' }).waitFor();
    assert.equal((await http(stack.baseUrl, 'GET', '/v2/balance', { token: poor.key })).body.balance_in_euro, 0.1);
  });

  test('the browser logged no errors but the refusals the tests asked for', () => {
    const unexpected = browserErrors.filter((e) => !/Failed to load resource: the server responded with a status of (401|402)/.test(e));
    assert.deepEqual(unexpected, []);
    assert.equal(browserErrors.filter((e) => /status of 401/.test(e)).length, 1);
    assert.equal(browserErrors.filter((e) => /status of 402/.test(e)).length, 1);
  });
});
