// `npm run screenshots`: the README's pictures of the console, taken from the real pages. Starts the
// whole service as the tests do (embedded PostgreSQL, a Temporal dev server, the worker and the API,
// the simulator for videos and voices, and buying credits against a stripe-mock as the payments tests
// run it), makes a workspace with a few jobs, a voice, speech, credits bought (a signed Stripe event),
// automatic top-up and a webhook through the console itself (and, for Usage, a second key's job and
// speech through the API), then photographs each screen into docs/screenshots/.
// With --serve it keeps the service running afterwards and prints its URL and key (for a look by hand).
// Every wait has its own timeout and the whole run a deadline: a step that fails or never ends stops the
// run, naming the step, with a picture of the page then in the temporary directory.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { startInfra } from '../test/helpers/infra.js';
import { chromiumInstalled, CHROMIUM_PATH, launchChromium, signIn } from '../test/helpers/browser.js';
import { encodeWav } from '../src/media/wav.js';

const OUT_DIR = path.resolve('docs', 'screenshots');
const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };
/** The whole run, from starting the service to the last picture (about a minute on 2 cores). */
const RUN_DEADLINE_MS = 10 * 60_000;
/** Each of the browser's, the service's and the infrastructure's stops afterwards. */
const STOP_DEADLINE_MS = 60_000;

/** What the run is doing: named when it fails or runs out of time. */
let step = 'starting';

/** `work`, or a rejection naming `what` once `ms` have passed. */
function within<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done after ${Math.round(ms / 1000)} s`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

async function main() {
  if (!chromiumInstalled()) throw new Error(`no Chromium at ${CHROMIUM_PATH} (apt-get install -y chromium, or set CHROMIUM_PATH)`);
  const serve = process.argv.includes('--serve');
  const stops: { what: string; stop: () => Promise<unknown> }[] = []; // what was started, the last first
  let shown: Page | undefined; // the page, for a picture of it if a step fails
  const photograph = async () => {
    step = 'starting PostgreSQL and Temporal';
    const infra = await startInfra('vva-screenshots-');
    stops.unshift({ what: 'stopping PostgreSQL and Temporal', stop: () => infra.stop() });
    Object.assign(process.env, infra.env);
    // test/helpers/stack.ts reads the infrastructure from the environment set just above.
    const { ADMIN_TOKEN, http, newCustomer, startStack, waitForJob } = await import('../test/helpers/stack.js');
    const payments = await import('../test/payments/setup.js');
    if (payments.STRIPE_MOCK_MISSING) throw new Error(`the Account screen shows buying credits: ${payments.STRIPE_MOCK_MISSING}`);
    step = 'starting stripe-mock';
    const stripe = await payments.startStripeMock();
    stops.unshift({ what: 'stopping stripe-mock', stop: () => stripe.stop() });
    step = 'starting the service';
    const stack = await startStack({ env: { RATE_LIMIT_PER_MINUTE: '1000', ...payments.stripeEnv(stripe) } });
    stops.unshift({ what: 'stopping the service', stop: () => stack.stop() });
    step = 'starting Chromium';
    const browser = await launchChromium();
    stops.unshift({ what: 'closing the browser', stop: () => browser.close() });

    step = 'making the workspace';
    const { key, workspaceId } = await newCustomer(stack, 25);
    fs.mkdirSync(OUT_DIR, { recursive: true });
    const page = await browser.newPage({ viewport: DESKTOP });
    shown = page;
    // Each picture once the page's CSS transitions have ended (a link left for another screen fades from
    // white to grey, a little longer than the next screen takes to show).
    const photo = async (name: string, opts: { fullPage: boolean; clip?: { x: number; y: number; width: number; height: number } }) => {
      await page.evaluate(() =>
        Promise.all(
          document
            .getAnimations()
            .filter((a) => a instanceof CSSTransition)
            .map((a) => a.finished),
        ),
      );
      await page.screenshot({ path: path.join(OUT_DIR, `${name}.png`), ...opts });
    };
    const shot = (name: string) => photo(name, { fullPage: true });

    step = 'Sign in';
    await page.goto(`${stack.baseUrl}/console`);
    await page.getByLabel('API key', { exact: true }).fill(key);
    await photo('sign-in', { fullPage: false, clip: { x: 0, y: 0, width: DESKTOP.width, height: 420 } });
    await signIn(page, stack.baseUrl, key);

    step = 'Videos';
    // Videos: a shortfall (2 asked, 1 delivered), then a job of two videos, one still running.
    const generate = async (opts: { n: number; duration: string; simulate?: string }) => {
      await page.getByLabel('Number of videos', { exact: true }).selectOption(String(opts.n));
      await page.getByLabel('Duration', { exact: true }).selectOption(opts.duration);
      await page.getByLabel('Simulator parameters (JSON)', { exact: true }).fill(opts.simulate ?? '');
      await page.getByRole('button', { name: 'Generate', exact: true }).click();
    };
    await page.getByLabel('Model', { exact: true }).selectOption('sim-video-1');
    await generate({ n: 2, duration: '4', simulate: '{"videos": 1, "delay_ms": 500}' });
    await page.getByText('Refunded €0.20').waitFor({ timeout: 30_000 });
    await generate({ n: 2, duration: '8', simulate: '{"delay_ms": 500}' });
    await page.locator('li[data-job-id] video').nth(2).waitFor({ timeout: 30_000 });
    await generate({ n: 1, duration: '6', simulate: '{"delay_ms": 600000}' });
    await page.getByText('Generating…').waitFor();
    await page.waitForFunction(() => [...document.querySelectorAll('video')].every((v) => v.readyState >= 2));
    await page.mouse.move(0, 0);
    await page.waitForTimeout(1000); // the players' loading indicators fade out
    await shot('videos');

    step = 'Voices';
    // Voices: one cloned from a file, then speech with it.
    await page.getByRole('link', { name: 'Voices', exact: true }).click();
    const wav = encodeWav(
      Int16Array.from({ length: 22_050 }, (_, i) => Math.round(8000 * Math.sin(i / 8))),
      22_050,
    );
    await page.getByLabel('Voice name', { exact: true }).fill('Narrator (me)');
    await page.getByLabel('Voice sample', { exact: true }).setInputFiles({ name: 'me.wav', mimeType: 'audio/wav', buffer: wav });
    await page.getByRole('button', { name: 'Clone voice', exact: true }).click();
    await page.getByRole('cell', { name: 'Narrator (me)' }).waitFor();
    await page.getByRole('button', { name: 'Speak', exact: true }).click();
    await page.getByText('Cost:').waitFor();
    await shot('voices');

    step = 'Account';
    // Account: credits bought with Checkout (Stripe's signed event), automatic top-up set, and a webhook
    // endpoint just added (its secret shown once).
    const paid = await payments.deliver(
      stack.baseUrl,
      payments.eventPayload('checkout.session.completed', payments.paidSession(workspaceId, 20)),
    );
    if (paid.body?.outcome !== 'credited') throw new Error(`the Checkout was not credited: ${JSON.stringify(paid.body)}`);
    await page.getByRole('link', { name: 'Account', exact: true }).click();
    await page.getByLabel('Top-up threshold', { exact: true }).fill('5');
    await page.getByLabel('Top-up amount', { exact: true }).fill('20');
    await page.getByRole('button', { name: 'Save top-up', exact: true }).click();
    await page.getByText(/^On: when a charge/).waitFor();
    await page.getByLabel('Amount', { exact: true }).fill('50');
    await page.getByLabel('Webhook URL', { exact: true }).fill('https://example.com/hooks/video');
    await page.getByRole('button', { name: 'Add webhook', exact: true }).click();
    await page.getByLabel('Signing secret', { exact: true }).waitFor();
    await page.getByRole('cell', { name: 'top-up' }).waitFor();
    await page.getByRole('cell', { name: /^Stripe pi_/ }).waitFor();
    await shot('account');

    step = 'Usage';
    // Usage: what was made above, and a second key's video and speech, over the last 7 days by model.
    const second = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${workspaceId}/api-keys`, { token: ADMIN_TOKEN, json: {} });
    const job = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: second.body.key,
      json: { prompt: 'a harbour at dawn', model: 'sim-video-1', durationSeconds: 8, parameters: { simulate: { delay_ms: 0 } } },
    });
    await waitForJob(stack, second.body.key, job.body.id);
    await http(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: second.body.key,
      json: { model: 'sim-speech-1', voice: 'sim-narrator', input: 'Welcome aboard. '.repeat(40) },
    });
    await page.getByRole('link', { name: 'Usage', exact: true }).click();
    await page.getByLabel('Range', { exact: true }).selectOption('7d');
    await page.locator(`tr[data-api-key-id="${second.body.id}"]`).waitFor();
    await page.locator('.recharts-legend-item').first().waitFor();
    await page.mouse.move(0, 0);
    await shot('usage');

    step = 'Batches';
    // Batches (made through the API): one ended, one half run, one cancelled.
    const batch = async (n: number, delay_ms: number) => {
      const requests = Array.from({ length: n }, (_, i) => ({
        custom_id: `clip-${i}`,
        method: 'POST',
        url: '/v2/videos/generations',
        body: { model: 'sim-video-1', prompt: `clip ${i}`, durationSeconds: 4, n: 1, parameters: { simulate: { delay_ms } } },
      }));
      return (await http(stack.baseUrl, 'POST', '/v2/batches', { token: key, json: { requests } })).body.id as string;
    };
    await batch(6, 300);
    const cancelled = await batch(30, 1_000);
    await http(stack.baseUrl, 'POST', `/v2/batches/${cancelled}/cancel`, { token: key });
    await page.getByRole('link', { name: 'Batches', exact: true }).click();
    await page.getByRole('button', { name: 'Download errors', exact: true }).waitFor({ timeout: 60_000 });
    await page.locator('.status', { hasText: /^cancelled$/ }).waitFor({ timeout: 60_000 });
    await batch(40, 1_500);
    await page.getByText(/^[1-9]\d* completed · 0 failed · \d+ left of 40/).waitFor({ timeout: 60_000 });
    await shot('batches');

    step = 'Videos on a phone';
    // The Videos screen on a phone.
    await page.setViewportSize(PHONE);
    await page.getByRole('link', { name: 'Videos', exact: true }).click();
    await page.getByLabel('Model', { exact: true }).selectOption('sim-video-1');
    await page.locator('li[data-job-id]').first().waitFor();
    await photo('videos-phone', { fullPage: false });

    return { baseUrl: stack.baseUrl, key };
  };
  try {
    const { baseUrl, key } = await within(photograph(), RUN_DEADLINE_MS, 'the run');
    process.stdout.write(`screenshots in ${OUT_DIR}: ${fs.readdirSync(OUT_DIR).join(', ')}\n`);
    if (serve) {
      process.stdout.write(`serving: ${baseUrl}/console  key: ${key}  (Ctrl-C to stop)\n`);
      await new Promise<void>((resolve) => process.once('SIGINT', resolve).once('SIGTERM', resolve));
    }
  } catch (err) {
    const picture = path.join(os.tmpdir(), 'console-screenshots-failed.png');
    const taken = await shown?.screenshot({ path: picture, fullPage: true, timeout: 10_000 }).then(
      () => true,
      () => false,
    );
    throw new Error(`${step}: ${(err as Error).message}${taken ? `\n(the page then: ${picture})` : ''}`, { cause: err });
  } finally {
    for (const { what, stop } of stops)
      await within(stop(), STOP_DEADLINE_MS, what).catch((err) => process.stderr.write(`screenshots: ${(err as Error).message}\n`));
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`screenshots failed: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
