// The cancel of a provider operation that nobody waits for any more: a job that failed for a reason
// the provider did not report itself (its deadline passed, its submission ended without an answer, a
// poll error ended it). The operation may still run, billed to the service, so the provider is asked to
// stop it, within a bounded wait, and its answer, or why there is none, is recorded with the job
// (video_jobs.cancel_answer). Best effort: a failure is recorded and logged, never thrown.
import type { Logger } from 'pino';
import type { Db } from '../db/pool.js';
import { describeAnyProviderError } from '../providers/video/provider-errors.js';
import type { CancelAnswer } from '../providers/video/types.js';

/** How long a caller waits for the provider to confirm the cancel (a later answer is still recorded). */
export const UNWATCHED_CANCEL_WAIT_MS = 10_000;
/** The longest cancel answer kept (the column's bound). */
const CANCEL_ANSWER_CHARS_MAX = 1000;

/** Records what the provider answered to the cancel of the job's operation. */
export async function recordCancelAnswer(db: Db, job_id: string, answer: string): Promise<void> {
  await db.query('UPDATE video_jobs SET cancel_answer = $2 WHERE id = $1', [job_id, answer.slice(0, CANCEL_ANSWER_CHARS_MAX)]);
}

/**
 * Runs `cancel` and records its answer; a cancel the provider refused or could not be asked is recorded
 * as such (with the error's code and its general description, never the provider's own text). Waits at
 * most `wait_ms`: past it, that no answer came is recorded and the cancel goes on, its answer recorded
 * when it comes.
 */
export async function cancelAndRecord(
  deps: { db: Db; logger: Logger },
  job_id: string,
  cancel: () => Promise<CancelAnswer>,
  wait_ms = UNWATCHED_CANCEL_WAIT_MS,
): Promise<void> {
  const { db, logger } = deps;
  // Written in the order they are made, so the provider's late answer replaces the note that none came.
  let writes = Promise.resolve();
  let answered = false;
  const record = (answer: string): Promise<void> =>
    (writes = writes.then(() =>
      recordCancelAnswer(db, job_id, answer).catch((err: unknown) =>
        logger.warn({ job_id, err: (err as Error).message }, 'the answer to the cancel of an operation could not be recorded'),
      ),
    ));
  const cancelling = cancel().then(
    async (answer) => {
      answered = true;
      logger.info({ job_id, answer: answer.answer }, 'the operation of a failed job was cancelled at the provider');
      await record(answer.answer);
    },
    async (err: unknown) => {
      answered = true;
      const e = describeAnyProviderError(err);
      logger.warn(
        { job_id, code: e.code, provider_message: (err as Error)?.message },
        'the operation of a failed job could not be cancelled at the provider',
      );
      await record(`cancel failed (${e.code}): ${e.message}`);
    },
  );
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<'gave_up'>((resolve) => (timer = setTimeout(() => resolve('gave_up'), wait_ms)));
  try {
    if ((await Promise.race([cancelling, gaveUp])) === 'gave_up' && !answered) {
      logger.warn({ job_id }, "the provider did not confirm the cancel of a failed job's operation in time");
      await record(`no answer to the cancel within ${wait_ms} ms`);
    }
  } finally {
    clearTimeout(timer);
  }
}
