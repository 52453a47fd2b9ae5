// What the Vertex AI Veo tests share: the fake of Vertex AI and Cloud Storage
// (test/fakes/vertex-veo-fake.ts) for the file, an adapter pointed at it, a request, and the checks of
// the adapter's errors.
import { after, before, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { VertexVeoFake } from '../fakes/vertex-veo-fake.js';
import { VertexVeoProvider, type VertexVeoOptions } from '../../src/providers/video/vertex-veo.js';
import { staticTokenSource } from '../../src/providers/video/vertex-veo-cache.js';
import { providerModelIdFor } from '../../src/models/catalog.js';
import { ProviderError, type VideoSubmission } from '../../src/providers/video/types.js';
import { projectPath } from '../../src/paths.js';

export const TOKEN = 'test-token';
export const MODEL_PATH = '/v1/projects/test-project/locations/europe-west4/publishers/google/models/veo-3.1-fast-generate-001';
export const asset = (name: string) => fs.readFileSync(projectPath('assets', 'sim-video', name));
export const PAYLOADS = [asset('16x9-4s.mp4'), asset('16x9-6s.mp4'), asset('16x9-8s.mp4')];

export let fake: VertexVeoFake;

export function provider(opts: Partial<VertexVeoOptions> = {}): VertexVeoProvider {
  return new VertexVeoProvider({
    projectId: 'test-project',
    apiEndpoint: fake.url,
    gcsApiEndpoint: fake.url,
    tokenSource: staticTokenSource(TOKEN),
    modelIdFor: (id) => providerModelIdFor(id, 'vertex'),
    requestTimeoutMs: 2_000,
    ...opts,
  });
}

export function request(extra: Partial<VideoSubmission> = {}): VideoSubmission {
  return {
    request_id: '7d0f2a8e-0000-4000-8000-000000000001',
    model: 'veo-3.1-fast-generate-001',
    prompt: 'a lighthouse at dusk, waves crashing',
    params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 2 },
    generate_audio: true,
    ...extra,
  };
}

/** Polls until the operation is no longer running. */
export async function settle(p: VertexVeoProvider, operation_id: string) {
  for (let i = 0; i < 20; i++) {
    const status = await p.poll(operation_id);
    if (status.state !== 'running') return status;
  }
  throw new Error('operation still running');
}

export async function rejectsWith(
  promise: Promise<unknown>,
  expected: { code: string; retryable: boolean; message?: RegExp; retry_after_ms?: number },
) {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof ProviderError, `a ProviderError, got ${String(err)}`);
    assert.equal(err.opts.code, expected.code, err.message);
    assert.equal(err.opts.retryable, expected.retryable, `${expected.code} retryable`);
    if (expected.message) assert.match(err.message, expected.message);
    if ('retry_after_ms' in expected) assert.equal(err.opts.retry_after_ms, expected.retry_after_ms);
    assert.ok(!err.message.includes(TOKEN), 'the access token never appears in an error');
    return true;
  });
}

/** Registers the file's hooks: the Vertex AI fake started for the file, and reset before each test. */
export function useVertexFake(): void {
  before(async () => {
    fake = await new VertexVeoFake().start();
  });
  after(async () => {
    await fake.stop();
  });
  beforeEach(() => fake.reset());
}
