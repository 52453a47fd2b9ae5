// Recorded event histories, for the replay test. They are append-only: each release's recordings keep
// their names and bytes for good (test/history-discipline.test.ts checks it against git and
// test/histories/MANIFEST). A release records its new paths in test/histories/<version>/, the version
// being package.json's; the first release's (0.1.0) are the files directly in test/histories/, beside two
// webhook-delivery recordings made before 0.2.0 (commit 3ca7b49; 0.2.0/ has the same bytes), kept as recorded.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import type { Stack } from './stack.js';

export const HISTORIES_DIR = path.join('test', 'histories');
export const MANIFEST = path.join(HISTORIES_DIR, 'MANIFEST');

/** This release's folder: test/histories/<package.json version>. */
export function releaseDir(): string {
  const { version } = JSON.parse(fs.readFileSync('package.json', 'utf8')) as { version: string };
  return path.join(HISTORIES_DIR, version);
}

export const sha256Of = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

/** The manifest's entries: path (relative to the project) -> sha256 of the file. */
export function readManifest(text = fs.existsSync(MANIFEST) ? fs.readFileSync(MANIFEST, 'utf8') : ''): Map<string, string> {
  const entries = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]{64}) {2}(\S+)$/.exec(line.trim());
    if (m) entries.set(m[2]!, m[1]!);
  }
  return entries;
}

/** Every recorded history file (relative paths, sorted): test/histories/*.json and test/histories/<version>/*.json. */
export function historyFiles(): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(HISTORIES_DIR, { withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith('.json')) out.push(path.join(HISTORIES_DIR, entry.name));
    if (entry.isDirectory()) {
      for (const f of fs.readdirSync(path.join(HISTORIES_DIR, entry.name))) if (f.endsWith('.json')) out.push(path.join(HISTORIES_DIR, entry.name, f));
    }
  }
  return out.sort();
}

/**
 * Writes every run of the workflow, oldest first, as <name>.json (and <name>.run<k>.json for earlier
 * runs) into this release's folder, and adds them to the manifest. A file already in the manifest is
 * never written again (it is kept, and said so): recordings are append-only; give a changed path a new name.
 */
export async function saveHistory(s: Stack, name: string, workflowId: string): Promise<void> {
  const dir = releaseDir();
  fs.mkdirSync(dir, { recursive: true });
  const handle = s.api.temporal.workflow.getHandle(workflowId);
  const runs: string[] = [];
  let runId: string | undefined = (await handle.describe()).runId;
  while (runId) {
    const history = await s.api.temporal.workflow.getHandle(handle.workflowId, runId).fetchHistory();
    runs.unshift(historyToJSON(history));
    runId = history.events![0]!.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  const manifest = readManifest();
  runs.forEach((json, i) => {
    const file = path.join(dir, i === runs.length - 1 ? `${name}.json` : `${name}.run${i + 1}.json`);
    if (manifest.has(file)) {
      // Append-only: an existing recording stays as it is; a changed path gets a new name.
      process.stderr.write(`${file} is already recorded (MANIFEST); kept as it is\n`);
      return;
    }
    fs.writeFileSync(file, json + '\n');
    fs.appendFileSync(MANIFEST, `${sha256Of(json + '\n')}  ${file}\n`);
  });
}
