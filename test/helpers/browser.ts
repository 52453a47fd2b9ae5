// A real browser for the console's tests and screenshots: the system's Chromium (Debian's `chromium`
// package), driven by playwright-core (which downloads no browser of its own).
import fs from 'node:fs';
import type { Browser, Page } from 'playwright-core';

export const CHROMIUM_PATH = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

export const chromiumInstalled = () => fs.existsSync(CHROMIUM_PATH);

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    // Ctrl-C is the process's to handle (npm run screenshots -- --serve stops the service, then the browser);
    // Playwright's own handler would exit at once, leaving PostgreSQL and Temporal running.
    handleSIGINT: false,
    args: [
      // Chromium's sandbox refuses to run as root (a container's default user).
      ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
      // Speech plays as soon as it arrives, and "Record" gets a fake microphone without a prompt.
      '--autoplay-policy=no-user-gesture-required',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
    ],
  });
}

/** Opens the console and signs in with `key`; resolves on the Videos screen. */
export async function signIn(page: Page, baseUrl: string, key: string): Promise<void> {
  await page.goto(`${baseUrl}/console`);
  await page.getByLabel('API key', { exact: true }).fill(key);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByRole('link', { name: 'Sign out', exact: true }).waitFor();
}
