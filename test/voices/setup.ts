// What the voice cloning tests share: one service stack per test file, real audio files of each
// format, and multipart requests to /v2/audio/voices sent as a client sends them.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import nodeHttp from 'node:http';
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { startStack, type Stack } from '../helpers/stack.js';
import { createReconcilerActivities, type ReconcileReport } from '../../activities/reconciler.js';
import { createLogger } from '../../src/logger.js';
import { SimulatedVoiceProvider } from '../../src/providers/voice/simulator.js';
import { encodeWav } from '../../src/media/wav.js';
import { holdSpeech } from '../../src/voices/speech-billing.js';

export let stack: Stack;
export let sim: SimulatedVoiceProvider;

export const MiB = 1024 * 1024;

/** A real WAV file: a sine tone, 16-bit mono 22.05 kHz. */
export function wavFile(seconds: number, hz = 440): Buffer {
  const samples = new Int16Array(Math.round(seconds * 22_050));
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / 22_050));
  return encodeWav(samples, 22_050);
}

/** A WAV of exactly `bytes` bytes (header + silence). */
export function wavOfSize(bytes: number): Buffer {
  const b = wavFile(0.01);
  const out = Buffer.alloc(bytes);
  b.copy(out, 0, 0, 44);
  return out;
}

/** Two MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz): recognised by frame sync. */
export function mp3File(): Buffer {
  const frame = Buffer.alloc(417);
  Buffer.from([0xff, 0xfb, 0x90, 0x64]).copy(frame);
  return Buffer.concat([frame, frame, frame]);
}

/** An Ogg page starting an Opus stream. */
export function oggOpusFile(): Buffer {
  const head = Buffer.alloc(27 + 1 + 19);
  head.write('OggS', 0, 'ascii');
  head[26] = 1; // one segment
  head[27] = 19;
  head.write('OpusHead', 28, 'ascii');
  return head;
}

export type Part = { name: string; value: string } | { name: string; file: Buffer; filename: string; type?: string };

export function formOf(parts: Part[]): FormData {
  const fd = new FormData();
  for (const p of parts) {
    if ('value' in p) fd.append(p.name, p.value);
    else fd.append(p.name, new Blob([new Uint8Array(p.file)], { type: p.type ?? 'audio/wav' }), p.filename);
  }
  return fd;
}

export async function postForm(key: string | null, body: FormData | Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(`${stack.baseUrl}/v2/audio/voices`, {
    method: 'POST',
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
    body: body as BodyInit,
  });
  const text = await res.text();
  const isJson = (res.headers.get('content-type') ?? '').includes('application/json');
  return { status: res.status, headers: res.headers, body: isJson ? JSON.parse(text) : text };
}

export const BOUNDARY = '----vva-test-boundary-7MA4YWxkTrZu0gW';
export const multipartType = `multipart/form-data; boundary=${BOUNDARY}`;

/** A handcrafted multipart body; `close: false` leaves out the closing boundary. */
export function rawMultipart(parts: Part[], opts: { close?: boolean } = {}): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition =
      'value' in p
        ? `form-data; name="${p.name}"`
        : `form-data; name="${p.name}"; filename="${p.filename}"\r\nContent-Type: ${p.type ?? 'audio/wav'}`;
    chunks.push(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: ${disposition}\r\n\r\n`));
    chunks.push('value' in p ? Buffer.from(p.value) : p.file);
    chunks.push(Buffer.from('\r\n'));
  }
  if (opts.close !== false) chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(chunks);
}

export const sample = (filename = 'sample.wav', seconds = 0.5): Part => ({ name: 'file', file: wavFile(seconds), filename });

export async function registryCount(workspaceId: string): Promise<number> {
  const r = await stack.db.query('SELECT 1 FROM voices WHERE workspace_id = $1', [workspaceId]);
  return r.rowCount ?? 0;
}

/** A raw multipart upload of `body` (declared in full) to POST /v2/audio/voices; the caller sends what it wants of it. */
export function uploadRequest(key: string, body: Buffer): nodeHttp.ClientRequest {
  const url = new URL(stack.baseUrl);
  return nodeHttp.request({
    host: url.hostname,
    port: url.port,
    method: 'POST',
    path: '/v2/audio/voices',
    headers: { authorization: `Bearer ${key}`, 'content-type': multipartType, 'content-length': String(body.length) },
  });
}

export function assertError(res: { status: number; body: any }, status: number, code: string, param: string | null) {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.error.code, code, JSON.stringify(res.body));
  assert.equal(res.body.error.param, param, JSON.stringify(res.body));
  assert.equal(typeof res.body.error.message, 'string');
  assert.equal(typeof res.body.error.type, 'string');
}

/** Registers the file's hooks: one service stack (and a simulated voice provider on its database) for the whole file. */
export function useVoicesStack(): void {
  before(async () => {
    stack = await startStack();
    sim = new SimulatedVoiceProvider(stack.db);
  });
  after(async () => {
    await stack.stop();
  });
}

/** One run of the reconciler's money step on `s`'s database, as its Schedule runs it. */
export async function reconcileMoney(s: Stack): Promise<ReconcileReport> {
  const activities = createReconcilerActivities({
    db: s.db,
    logger: createLogger('silent', 'test'),
    taskQueue: s.config.temporal.taskQueue,
    video: { pollIntervalMs: 100, pollIntervalMsMax: 300, jobTimeoutMs: 60_000 },
  });
  return (await new MockActivityEnvironment(undefined, { client: s.api.temporal }).run(activities.reconcileMoney)) as ReconcileReport;
}

/** A speech request of 10 characters of sim-speech-1 held straight in the tables, as one is before its provider is asked. */
export async function holdTenCharacters(s: Stack, workspaceId: string, idempotencyKey: string): Promise<string> {
  const held = await holdSpeech(s.db, {
    speechRequestId: randomUUID(),
    workspaceId,
    idempotencyKey,
    requestFingerprint: 'f',
    model: 'sim-speech-1',
    voice: 'sim-deep',
    voiceRegistryId: null,
    characters: 10,
    responseFormat: 'wav',
    cost_micro_eur: 10 * SIM_SPEECH_MICRO_EUR_PER_CHARACTER,
  });
  assert.equal(held.kind, 'held');
  return held.kind === 'held' ? held.speech_request_id : '';
}

/** sim-speech-1's price: 0.15 EUR per 1,000 characters. */
export const SIM_SPEECH_MICRO_EUR_PER_CHARACTER = 150;
