// Saves the event history of a workflow, every run of it, for the replay test (test/histories/).
import fs from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import type { Stack } from './stack.js';

export const HISTORIES_DIR = path.join('test', 'histories');

/** Writes every run of the workflow, oldest first, as <name>.json (and <name>.run<k>.json for earlier runs). */
export async function saveHistory(s: Stack, name: string, workflowId: string): Promise<void> {
  fs.mkdirSync(HISTORIES_DIR, { recursive: true });
  const handle = s.api.temporal.workflow.getHandle(workflowId);
  const runs: string[] = [];
  let runId: string | undefined = (await handle.describe()).runId;
  while (runId) {
    const history = await s.api.temporal.workflow.getHandle(handle.workflowId, runId).fetchHistory();
    runs.unshift(historyToJSON(history));
    runId = history.events![0]!.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  runs.forEach((json, i) => {
    const file = i === runs.length - 1 ? `${name}.json` : `${name}.run${i + 1}.json`;
    fs.writeFileSync(path.join(HISTORIES_DIR, file), json + '\n');
  });
}
