// A workflow's history (its latest run), with its events counted by type and the signals it received.
import type { Client } from '@temporalio/client';

type HistoryEvent = Record<string, unknown>;

export interface WorkflowHistoryFigures {
  events: number;
  /** Event type (from its attributes' name, e.g. activityTaskScheduled) -> count. */
  by_type: Map<string, number>;
  /** Signals the workflow received (the poller's operationEnded; a repeated signal would show here). */
  signals: number;
}

/** The event's type, as named by its attributes field (`activityTaskScheduledEventAttributes` -> activityTaskScheduled). */
function typeOf(event: HistoryEvent): string {
  for (const [k, v] of Object.entries(event)) if (k.endsWith('EventAttributes') && v) return k.slice(0, -'EventAttributes'.length);
  return 'unknown';
}

export async function workflowHistoryFigures(client: Client, workflowId: string): Promise<WorkflowHistoryFigures> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const list = (history.events ?? []) as HistoryEvent[];
  const by_type = new Map<string, number>();
  for (const e of list) {
    const type = typeOf(e);
    by_type.set(type, (by_type.get(type) ?? 0) + 1);
  }
  return { events: list.length, by_type, signals: by_type.get('workflowExecutionSignaled') ?? 0 };
}
