// Recorded event histories, for the replay test. Each supported release records every path of its
// workflows once, in test/histories/<version>/, and lists them in test/histories/MANIFEST with their
// SHA-256. Within the support window (SUPPORTED_RELEASES; docs/architecture.md, "Changing a workflow") recordings are
// append-only: test/platform/history-discipline.test.ts checks them against the manifest and git.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import type { Stack } from './stack.js';

export const HISTORIES_DIR = path.join('test', 'histories');
export const MANIFEST = path.join(HISTORIES_DIR, 'MANIFEST');

/**
 * The releases whose runs a worker of this code must be able to finish: this one and the one before it.
 * A release leaving the window has its recordings deleted with the code that served it.
 */
export const SUPPORTED_RELEASES = ['1.0.0'];

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

/** The release a recording belongs to (its folder's name). */
export const releaseOf = (file: string) => path.basename(path.dirname(file));

/** Every recorded history file (relative paths, sorted): test/histories/<version>/*.json. */
export function historyFiles(): string[] {
  const out: string[] = [];
  if (!fs.existsSync(HISTORIES_DIR)) return out;
  for (const entry of fs.readdirSync(HISTORIES_DIR, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    for (const f of fs.readdirSync(path.join(HISTORIES_DIR, entry.name)))
      if (f.endsWith('.json')) out.push(path.join(HISTORIES_DIR, entry.name, f));
  }
  return out.sort();
}

/**
 * Writes the workflow's history as <name>.json into this release's folder and adds it to the manifest.
 * A file already in the manifest is never written again (it is kept, and said so).
 */
export async function saveHistory(s: Stack, name: string, workflowId: string): Promise<void> {
  const dir = releaseDir();
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}.json`);
  if (readManifest().has(file)) {
    process.stderr.write(`${file} is already recorded (MANIFEST); kept as it is\n`);
    return;
  }
  const json = historyToJSON(await s.api.temporal.workflow.getHandle(workflowId).fetchHistory());
  fs.writeFileSync(file, json + '\n');
  fs.appendFileSync(MANIFEST, `${sha256Of(json + '\n')}  ${file}\n`);
}
