// The console's buying of credits in a real browser (the system's Chromium through playwright-core) against
// the real service and a real stripe-mock (behind the payments tests' proxy): "Add credits" sends the
// browser to the Checkout Session's page (stripe-mock's url; the page itself, Stripe's, is stood in for),
// a signed checkout.session.completed for that Session credits the workspace and the screen says so, and
// the balance shows it after a reload; amounts out of range and automatic top-up without a saved card are
// refused with the API's own words; automatic top-up is saved and kept, its form laid out as the others
// on a laptop and on a phone; a top-up Stripe declines turns it off and the screen says why; on a service
// without Stripe, "Add credits" says billing is not configured (503) and the screen then says so instead
// of offering it. The browser logs no error but the refusals asked for, and no Content-Security-Policy
// violation. Skipped, saying so, without Chromium or stripe-mock.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser, Locator, Page } from 'playwright-core';
import { CHROMIUM_PATH, chromiumInstalled, launchChromium, signIn } from '../helpers/browser.js';
import { assertAuditHolds, http, newCustomer, simJob, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import {
  declineTopUpsOf,
  deliver,
  eventPayload,
  paidSession,
  startStripeMock,
  STRIPE_MOCK_MISSING,
  stripeEnv,
  stripeId,
  type StripeMock,
} from '../payments/setup.js';

const skip = !chromiumInstalled()
  ? `no Chromium at ${CHROMIUM_PATH}: the console's browser tests need Debian's chromium package (as root: apt-get update && apt-get install -y chromium)`
  : STRIPE_MOCK_MISSING;
if (skip) process.stderr.write(`console-credits.test.ts skipped: ${skip}\n`);

const exact = { exact: true } as const;

describe('web console: buying credits', { skip }, () => {
  let mock: StripeMock;
  let stack: Stack;
  let customer: { workspaceId: string; key: string };
  let browser: Browser;
  let page: Page;
  const browserErrors: string[] = [];
  /** The jobs charged, waited for before the audit. */
  const jobs: string[] = [];

  before(async () => {
    mock = await startStripeMock();
    stack = await startStack({ env: stripeEnv(mock) });
    customer = await newCustomer(stack, 10);
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') browserErrors.push(m.text());
    });
    page.on('pageerror', (e) => browserErrors.push(`uncaught: ${e.message}`));
    // Stripe's hosted Checkout page is not reachable from here: a stand-in page at its address.
    await page.route('https://checkout.stripe.com/**', (route) =>
      route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>Stripe Checkout</title><p>Pay</p>' }),
    );
    await signIn(page, stack.baseUrl, customer.key);
    await page.getByRole('link', { name: 'Account', exact: true }).click();
  });
  after(async () => {
    await browser?.close();
    if (stack) {
      for (const id of jobs) await waitForJob(stack, customer.key, id);
      await assertAuditHolds(stack);
    }
    await stack?.stop();
    await mock?.stop();
  });

  const balance = () => page.locator('output#balance');
  const alertText = () => page.getByRole('alert').first().textContent();
  const checkoutRequests = () => mock.requests.filter((q) => q.method === 'POST' && q.path === '/v1/checkout/sessions');
  const account = async () => (await http(stack.baseUrl, 'GET', '/v2/account', { token: customer.key })).body;
  async function addCredits(amount: string) {
    await page.getByLabel('Amount', exact).fill(amount);
    await page.getByRole('button', { name: 'Add credits', exact: true }).click();
  }

  test('the Account screen: the balance, "Add credits" with its bounds, automatic top-up off', async () => {
    await page.waitForFunction(() => document.querySelector('output#balance')?.textContent === '€10.00');
    await page.getByRole('button', { name: 'Add credits', exact: true }).waitFor();
    assert.match((await page.locator('#add-credits-help').textContent())!, /from €5\.00 to €1,000\.00/);
    assert.equal(await page.getByText('Off.', exact).count(), 1);
  });

  test("an amount out of range shows the API's 400 in words, and asks Stripe nothing", async () => {
    for (const amount of ['2', '1000.01']) {
      await addCredits(amount);
      await page.getByRole('alert').waitFor();
      assert.equal(
        await alertText(),
        'The request was refused (400 invalid_parameter): amount_in_euro must be between 5 and 1000 EUR.',
        `amount ${amount}`,
      );
    }
    await addCredits('');
    await page.waitForFunction(() => !document.querySelector('[role="alert"]')?.textContent?.includes('between'));
    assert.match((await alertText())!, /^The request was refused \(400 [a-z_]+\): .*amount_in_euro/);
    assert.equal(checkoutRequests().length, 0);
    assert.equal(await balance().textContent(), '€10.00');
  });

  test('automatic top-up before any Checkout: refused in words (no card saved yet)', async () => {
    await page.getByLabel('Top-up threshold', exact).fill('34');
    await page.getByLabel('Top-up amount', exact).fill('10');
    await page.getByRole('button', { name: 'Save top-up', exact: true }).click();
    const refusal = page.getByRole('alert').filter({ hasText: 'payment_method_required' });
    await refusal.waitFor();
    assert.match((await refusal.textContent())!, /buy credits once with POST \/v2\/billing\/checkout first/);
    assert.equal((await account()).auto_top_up, null);
  });

  test("Add credits sends the browser to the Checkout Session's page; the signed webhook credits it; the screen says so", async () => {
    await addCredits('25');
    await page.waitForURL(/^https:\/\/checkout\.stripe\.com\//);
    const [sent] = checkoutRequests();
    assert.ok(sent?.response, 'a Checkout Session was created at stripe-mock');
    const session = sent.response.body as { id: string; url: string; payment_intent: string };
    assert.equal(sent.response.status, 200);
    assert.equal(page.url(), session.url, "the browser is at the Session's url");
    assert.equal(checkoutRequests().length, 1);
    assert.equal(sent.form.get('mode'), 'payment');
    assert.equal(sent.form.get('line_items[0][price_data][unit_amount]'), '2500');
    assert.equal(sent.form.get('line_items[0][price_data][currency]'), 'eur');
    assert.equal(sent.form.get('metadata[workspace_id]'), customer.workspaceId);
    const successUrl = sent.form.get('success_url')!;
    assert.equal(successUrl, `${stack.baseUrl}/console?checkout=paid#/account`);
    assert.equal(sent.form.get('cancel_url'), `${stack.baseUrl}/console?checkout=cancelled#/account`);

    // Stripe says the Session is paid (a signed event), and sends the customer back to success_url.
    const completed = paidSession(customer.workspaceId, 25, {
      id: session.id,
      payment_intent: session.payment_intent,
      customer: stripeId('cus'),
    });
    const delivered = await deliver(stack.baseUrl, eventPayload('checkout.session.completed', completed));
    assert.equal(delivered.status, 200);
    assert.equal(delivered.body.outcome, 'credited');
    await page.goto(successUrl);
    await page.getByRole('status').filter({ hasText: 'Credited €25.00.' }).waitFor();
    assert.equal(new URL(page.url()).search, '', 'the return is not read twice');
    await page.reload();
    await page.waitForFunction(() => document.querySelector('output#balance')?.textContent === '€35.00');
    await page.getByRole('cell', { name: `Stripe ${session.payment_intent}` }).waitFor();
    assert.equal((await account()).balance_in_euro, 35);
  });

  test('automatic top-up: saved with the card the Checkout saved, and kept after a reload', async () => {
    await page.getByLabel('Top-up threshold', exact).fill('34');
    await page.getByLabel('Top-up amount', exact).fill('10');
    await page.getByRole('button', { name: 'Save top-up', exact: true }).click();
    const on = 'On: when a charge leaves the balance below €34.00, €10.00 is charged to your saved card.';
    await page.getByText(on, exact).waitFor();
    assert.deepEqual((await account()).auto_top_up, { threshold_in_euro: 34, amount_in_euro: 10 });
    await page.reload();
    await page.getByText(on, exact).waitFor();
    assert.equal(await page.getByLabel('Top-up threshold', exact).inputValue(), '34');
    assert.equal(await page.getByLabel('Top-up amount', exact).inputValue(), '10');
    await page.getByRole('button', { name: 'Turn off top-up', exact: true }).waitFor();
  });

  test('automatic top-up is laid out as "Add credits": fields side by side and buttons in a row; on a phone, stacked', async () => {
    const box = async (l: Locator) => (await l.boundingBox())!;
    const layout = async () => ({
      threshold: await box(page.getByLabel('Top-up threshold', exact)),
      amount: await box(page.getByLabel('Top-up amount', exact)),
      save: await box(page.getByRole('button', { name: 'Save top-up', exact: true })),
      off: await box(page.getByRole('button', { name: 'Turn off top-up', exact: true })),
      credits: await box(page.getByLabel('Amount', exact)),
    });
    const desktop = await layout();
    assert.equal(desktop.amount.y, desktop.threshold.y, 'threshold and amount on one row');
    assert.ok(desktop.amount.x > desktop.threshold.x + desktop.threshold.width);
    assert.equal(desktop.off.y, desktop.save.y, 'its two buttons on one row');
    assert.ok(desktop.save.y > desktop.threshold.y + desktop.threshold.height, 'the buttons below the fields');
    assert.equal(desktop.threshold.height, desktop.credits.height, 'fields the size of "Add credits"');
    await page.setViewportSize({ width: 375, height: 740 });
    try {
      const phone = await layout();
      assert.ok(phone.amount.y > phone.threshold.y + phone.threshold.height, 'threshold above amount');
      assert.equal(phone.amount.width, phone.threshold.width);
      assert.equal(phone.off.y, phone.save.y, 'its two buttons on one row');
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      assert.ok(overflow <= 0, `the Account screen is ${overflow} px wider than the screen`);
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });

  test('a top-up Stripe declines: automatic top-up is off, the screen says why, and the webhook event is sent', async () => {
    await page.getByLabel('Webhook URL', exact).fill('http://127.0.0.1:9/hooks');
    await page.getByRole('button', { name: 'Add webhook', exact: true }).click();
    await page.getByLabel('Signing secret', exact).waitFor();
    mock.answer = declineTopUpsOf(customer.workspaceId, 'authentication_required');
    try {
      // 35 - 1.6 = 33.4: below 34, one top-up, declined at once.
      const job = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
        token: customer.key,
        json: simJob({ outcome: 'succeed' }, { n: 4, durationSeconds: 8 }),
      });
      assert.equal(job.status, 202, JSON.stringify(job.body));
      jobs.push(job.body.id);
      for (let i = 0; (await account()).auto_top_up !== null; i++) {
        assert.ok(i < 200, 'the top-up was not declined');
        await sleep(50);
      }
    } finally {
      mock.answer = null;
    }
    await page.reload();
    const failed = page.getByRole('status', { name: 'Automatic top-up failed', exact: true });
    await failed.waitFor();
    assert.equal(
      await failed.textContent(),
      'Automatic top-up is off: automatic top-up of 10 EUR failed: Your card was declined. This transaction requires authentication. ' +
        '(authentication_required). Nothing was credited for it; save it again to turn it back on.',
    );
    await page.getByText('Off.', exact).waitFor();
    assert.equal(await page.getByLabel('Top-up threshold', exact).inputValue(), '');
    assert.equal(await page.getByRole('button', { name: 'Turn off top-up', exact: true }).count(), 0);
    assert.equal(await balance().textContent(), '€33.40');
    const events = await stack.db.query("SELECT 1 FROM webhook_events WHERE workspace_id = $1 AND type = 'billing.auto_top_up_failed'", [
      customer.workspaceId,
    ]);
    assert.equal(events.rowCount, 1);
    // The endpoint's deliveries list the event (its receiver is down: an attempt that failed).
    const endpoint = page.getByRole('listitem', { name: 'Webhook http://127.0.0.1:9/hooks', exact: true });
    for (let i = 0; ; i++) {
      await endpoint.getByRole('button', { name: 'Deliveries', exact: true }).click();
      const cell = endpoint.getByRole('cell', { name: 'billing.auto_top_up_failed', exact: true });
      if (await cell.first().isVisible()) break;
      assert.ok(i < 40, 'no delivery of billing.auto_top_up_failed');
      await endpoint.getByRole('button', { name: 'Hide deliveries', exact: true }).click();
      await sleep(250);
    }
  });

  test('a service without Stripe: "Add credits" says billing is not configured (503), then the screen says so', async () => {
    // The operator restarts the API without a Stripe key; the page loaded before still offers "Add credits".
    for (const id of jobs.splice(0)) await waitForJob(stack, customer.key, id);
    const port = new URL(stack.baseUrl).port;
    const env = Object.fromEntries(Object.entries(stack.env).filter(([k]) => !k.startsWith('STRIPE_')));
    await stack.stop();
    stack = await startStack({ env: { ...env, PORT: port }, worker: false });
    assert.equal(stack.baseUrl, `http://127.0.0.1:${port}`);
    await addCredits('20');
    const refusal = page.getByRole('alert').filter({ hasText: 'billing_not_configured' });
    await refusal.waitFor();
    assert.equal(
      await refusal.textContent(),
      'Service unavailable (503 billing_not_configured): buying credits is not configured on this service (no Stripe key).',
    );
    await page.reload();
    await page.getByRole('note').filter({ hasText: 'Buying credits is not configured on this service' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Add credits', exact: true }).count(), 0);
    assert.equal(await page.getByRole('heading', { name: 'Automatic top-up', exact: true }).count(), 0);
    assert.equal(await balance().textContent(), '€33.40');
  });

  test('the browser logged no error but the refusals asked for', () => {
    const unexpected = browserErrors.filter((e) => !/Failed to load resource: the server responded with a status of (400|503)/.test(e));
    assert.deepEqual(unexpected, []);
    assert.equal(browserErrors.filter((e) => /status of 400/.test(e)).length, 4);
    assert.equal(browserErrors.filter((e) => /status of 503/.test(e)).length, 1);
  });
});
