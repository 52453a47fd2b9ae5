// What the provider callback tests share: the fal and Replicate fakes for the file, adapters pointed
// at them, their signed deliveries for a job, and a callback route served on its own with stubbed
// dependencies.
import { after, before, beforeEach } from 'node:test';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import express from 'express';
import pino from 'pino';
import { FalFake } from '../fakes/fal-fake.js';
import { ReplicateFake } from '../fakes/replicate-fake.js';
import { FalVideoProvider } from '../../src/providers/video/fal.js';
import { ReplicateVideoProvider } from '../../src/providers/video/replicate.js';
import { videoModelBackendFor } from '../../src/models/catalog.js';
import { errorHandler } from '../../src/http/errors.js';
import { providerCallbackRoutes, type CallbackForJob, type ProviderCallbackDeps } from '../../src/video-jobs/callback-routes.js';
import { providerCallbackUrl } from '../../src/video-jobs/callbacks.js';
import type { VideoProvider, VideoSubmission } from '../../src/providers/video/types.js';

export const JOB_ID = '5b1c0c9e-3f7a-4c1e-9a55-0d6f4f1d2e77';
export const request: VideoSubmission = {
  request_id: JOB_ID,
  model: 'veo-3.1-fast-generate-001',
  prompt: 'a lighthouse',
  params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 },
  generate_audio: true,
};

export let fal: FalFake;
export let replicate: ReplicateFake;

export const falProvider = () =>
  new FalVideoProvider({ key: fal.key, queueUrl: fal.url, jwksUrl: fal.jwksUrl, backendFor: (id) => videoModelBackendFor(id, 'fal') });
export const replicateProvider = () =>
  new ReplicateVideoProvider({ token: replicate.token, apiUrl: replicate.url, backendFor: (id) => videoModelBackendFor(id, 'replicate') });

/** Submits through the adapter with the callback URL of `base`, ends the request at the fake, returns the fake's delivery. */
export async function falCallback(base: string, job_id = JOB_ID) {
  await falProvider().submit(request, { callback_url: providerCallbackUrl(base, 'fal', job_id) });
  await fal.finishAll();
  return fal.callbacks.at(-1)!;
}

export async function replicateCallback(base: string, job_id = JOB_ID) {
  await replicateProvider().submit(request, { callback_url: providerCallbackUrl(base, 'replicate', job_id) });
  await replicate.finishAll();
  return replicate.callbacks.at(-1)!;
}

/** A router of its own, with its own adapters and limits; nudges recorded. */
export async function callbackServer(deps: Partial<ProviderCallbackDeps> = {}) {
  const providers = new Map<string, VideoProvider>([
    ['fal', falProvider()],
    ['replicate', replicateProvider()],
  ]);
  const nudged: CallbackForJob[] = [];
  const app = express();
  app.use(providerCallbackRoutes({ providerFor: (b) => providers.get(b), nudgeJob: async (c) => (nudged.push(c), 'nudged'), ...deps }));
  app.use(errorHandler(pino({ level: 'silent' })));
  const server = http.createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    nudged,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * Sends a request's head with `content_length` declared and only `sent` of its body, then waits for the
 * answer: an answer to a body never sent in full is one given before reading it. The connection stays
 * open until `release` is called (a slow sender) unless the server closes it.
 */
export function partialRequest(
  port: number,
  path: string,
  headers: Record<string, string>,
  content_length: number,
  sent: Buffer = Buffer.alloc(0),
) {
  const socket = net.connect(port, '127.0.0.1');
  let data = '';
  let closed = false;
  const answered = new Promise<{ status: number; head: string; closed: () => boolean }>((resolve) => {
    socket.on('data', (d) => {
      data += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(data);
      if (m && data.includes('\r\n\r\n'))
        resolve({ status: Number(m[1]), head: data.slice(0, data.indexOf('\r\n\r\n')).toLowerCase(), closed: () => closed });
    });
    socket.on('close', () => {
      closed = true;
      resolve({ status: 0, head: data, closed: () => true });
    });
    socket.on('error', () => {});
  });
  const head = [
    `POST ${path} HTTP/1.1`,
    'Host: 127.0.0.1',
    `Content-Length: ${content_length}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    '',
    '',
  ].join('\r\n');
  socket.write(head);
  if (sent.length) socket.write(sent);
  return { answered, release: () => socket.destroy(), socket };
}

/** Registers the file's hooks: the fal and Replicate fakes started for the file, reset before each test to finish at once. */
export function useProviderFakes(): void {
  before(async () => {
    fal = await new FalFake().start();
    replicate = await new ReplicateFake().start();
  });
  after(async () => {
    await fal.stop();
    await replicate.stop();
  });
  beforeEach(() => {
    fal.reset();
    replicate.reset();
    fal.defaultPlan = { queue_polls: 0, progress_polls: 0 };
    replicate.defaultPlan = { starting_polls: 0, processing_polls: 0 };
  });
}
