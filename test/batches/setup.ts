// What the batch tests share: request lines of videos and speech with the simulators' triggers, and
// waiting for a batch to end.
import assert from 'node:assert/strict';
import { http, simJob, type Stack } from '../helpers/stack.js';

/** sim-video-1, 4 s at 720p: 0.2 EUR a video. */
export const VIDEO_UNIT_MICRO_EUR = 200_000;
/** sim-speech-1: 0.15 EUR per 1000 characters. */
export const SPEECH_CHAR_MICRO_EUR = 150;

export type Outcome = 'ok' | 'fail' | 'short';

/** A video request (n=2): succeeds, fails at the provider, or delivers one of two (a shortfall). */
export function videoLine(custom_id: string, outcome: Outcome, delay_ms = 300) {
  const simulate = outcome === 'fail' ? { outcome: 'fail', delay_ms } : outcome === 'short' ? { videos: 1, delay_ms } : { delay_ms };
  return { custom_id, method: 'POST', url: '/v2/videos/generations', body: simJob(simulate, { n: 2 }) };
}

export function speechLine(custom_id: string, input: string) {
  return { custom_id, method: 'POST', url: '/v2/audio/speech', body: { model: 'sim-speech-1', voice: 'sim-narrator', input } };
}

export async function waitForBatch(stack: Pick<Stack, 'baseUrl'>, key: string, id: string, timeout_ms = 120_000): Promise<any> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const r = await http(stack.baseUrl, 'GET', `/v2/batches/${id}`, { token: key });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    if (['completed', 'cancelled', 'expired', 'failed'].includes(r.body.status)) return r.body;
    if (Date.now() > deadline) throw new Error(`batch ${id} still ${r.body.status} after ${timeout_ms} ms: ${JSON.stringify(r.body)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

/** The JSONL lines of a file's content. */
export async function fileLines(stack: Pick<Stack, 'baseUrl'>, key: string, id: string): Promise<any[]> {
  const r = await fetch(`${stack.baseUrl}/v2/files/${id}/content`, { headers: { authorization: `Bearer ${key}` } });
  const text = await r.text();
  assert.equal(r.status, 200, text);
  assert.match(r.headers.get('content-type') ?? '', /^application\/jsonl/);
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));
}

/** Waits until `n` of the batch's video jobs have started (been created). */
export async function waitForBatchJobs(stack: Pick<Stack, 'db'>, batchId: string, n: number): Promise<void> {
  for (let i = 0; ; i++) {
    const jobs = await stack.db.query('SELECT count(*)::int AS n FROM video_jobs WHERE batch_id = $1', [batchId]);
    if (jobs.rows[0].n === n) return;
    assert.ok(i < 200, `${n} jobs of batch ${batchId} never started`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
