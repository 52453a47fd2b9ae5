// A workflow's whole history: every run of one workflow id, from the latest back through each run it
// continued as new from (continuedExecutionRunId), with its events counted by type.
import type { Client } from '@temporalio/client';

type HistoryEvent = Record<string, unknown> & { eventId?: unknown };

export interface WorkflowHistoryFigures {
  runs: number;
  events: number;
  /** Event type (from its attributes' name, e.g. activityTaskScheduled) -> count, over all runs. */
  by_type: Map<string, number>;
  /**
   * Provider polls that the history itself shows: attempts of awaitVideoGeneration (or of the first
   * release's pollVideoGeneration), and of submitAndAwaitVideoGeneration but its first (the submit).
   */
  poll_attempts: number;
}

/** The event's type, as named by its attributes field (`activityTaskScheduledEventAttributes` -> activityTaskScheduled). */
function typeOf(event: HistoryEvent): string {
  for (const [k, v] of Object.entries(event)) if (k.endsWith('EventAttributes') && v) return k.slice(0, -'EventAttributes'.length);
  return 'unknown';
}

/** At most this many runs are followed (a job continues as new every few hundred polls at most). */
const MAX_RUNS = 1_000;

export async function workflowHistoryFigures(client: Client, workflowId: string): Promise<WorkflowHistoryFigures> {
  const by_type = new Map<string, number>();
  let runs = 0;
  let events = 0;
  let poll_attempts = 0;
  let runId: string | undefined;
  do {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    const list = (history.events ?? []) as HistoryEvent[];
    runs++;
    events += list.length;
    const activityOf = new Map<string, string>();
    for (const e of list) {
      const type = typeOf(e);
      by_type.set(type, (by_type.get(type) ?? 0) + 1);
      const scheduled = e['activityTaskScheduledEventAttributes'] as { activityType?: { name?: string } } | undefined;
      if (scheduled) activityOf.set(String(e.eventId), scheduled.activityType?.name ?? '');
      const started = e['activityTaskStartedEventAttributes'] as { scheduledEventId?: unknown; attempt?: number } | undefined;
      if (started) {
        const name = activityOf.get(String(started.scheduledEventId));
        if (name === 'awaitVideoGeneration' || name === 'pollVideoGeneration') poll_attempts += started.attempt ?? 1;
        if (name === 'submitAndAwaitVideoGeneration') poll_attempts += (started.attempt ?? 1) - 1;
      }
    }
    const first = list[0]?.['workflowExecutionStartedEventAttributes'] as { continuedExecutionRunId?: string | null } | undefined;
    runId = first?.continuedExecutionRunId || undefined;
  } while (runId && runs < MAX_RUNS);
  return { runs, events, by_type, poll_attempts };
}
