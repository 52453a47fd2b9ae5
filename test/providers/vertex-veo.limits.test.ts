// The Vertex AI Veo adapter's limits against the fake: never more outputs than asked, only the
// service-owned Cloud Storage prefix fetched, large operations read a few at a time, oversized
// outputs refused while reading.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LARGE_OPERATION_BYTES, CONCURRENT_LARGE_OPERATION_READS_MAX } from '../../src/providers/video/vertex-veo.js';
import { PAYLOADS, fake, provider, request, settle, rejectsWith, useVertexFake } from './vertex-veo.setup.js';

useVertexFake();

describe('Vertex AI Veo adapter: every documented answer', () => {
  test('never more outputs than n, whatever the provider returns', async () => {
    fake.scenario = { videos: 4 };
    const p = provider();
    const { operation_id } = await p.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 2 } }));
    const status = await settle(p, operation_id);
    assert.equal(status.state === 'succeeded' && status.outputs.length, 2);
  });

  test('Cloud Storage URIs outside the service-owned prefix are never fetched', async () => {
    fake.scenario = { gcsUriOverride: 'gs://someone-else/videos/sample_0.mp4' };
    const p = provider({ outputGcsUri: 'gs://our-bucket/videos' });
    const { operation_id } = await p.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 } }));
    const status = await settle(p, operation_id);
    assert.equal(status.state, 'succeeded');
    const out = status.state === 'succeeded' ? status.outputs[0]! : { ref: '', content_type: '' };
    await rejectsWith(p.fetchOutput(operation_id, out), { code: 'untrusted_output_location', retryable: false });
    // a sibling folder sharing the prefix's spelling is not under it
    await rejectsWith(p.fetchOutput(operation_id, { ref: 'gs://our-bucket/videos-other/x.mp4', content_type: 'video/mp4' }), {
      code: 'untrusted_output_location',
      retryable: false,
    });
    // without an output bucket configured, no gs:// URI is trusted
    await rejectsWith(provider().fetchOutput(operation_id, { ref: 'gs://our-bucket/videos/x.mp4', content_type: 'video/mp4' }), {
      code: 'untrusted_output_location',
      retryable: false,
    });
    assert.equal(fake.requestsTo('download').length, 0);
  });

  test(`finished operations with large inline videos are read at most ${CONCURRENT_LARGE_OPERATION_READS_MAX} at once per process; small answers never wait`, async () => {
    const big = Buffer.concat([PAYLOADS[0]!, Buffer.alloc(LARGE_OPERATION_BYTES)]);
    // Each answer's last KiB comes 200 ms after the rest, so the six are read at once, as a slow network makes them.
    fake.scenario = { pollsUntilDone: 0, payloads: [big], answerPauseMs: 200 };
    const p = provider();
    const ops = [];
    for (let i = 0; i < 6; i++)
      ops.push(
        (
          await p.submit(
            request({
              request_id: `7d0f2a8e-0000-4000-8000-00000000010${i}`,
              params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 },
            }),
          )
        ).operation_id,
      );
    const statuses = await Promise.all(ops.map((id) => p.poll(id)));
    for (const st of statuses) assert.equal(st.state, 'succeeded');
    assert.equal(p.largeReadStats.in_flight_max, CONCURRENT_LARGE_OPERATION_READS_MAX, 'large answers queued for a slot');
    assert.equal(p.largeReadStats.in_flight, 0, 'every slot given back');
    const copies = await Promise.all(ops.map((id) => p.fetchOutput(id, { ref: 'inline:0', content_type: 'video/mp4' })));
    for (const c of copies) assert.ok(c.equals(big));
    fake.scenario = { pollsUntilDone: 5 };
    const running = await p.submit(request());
    const before = p.largeReadStats.in_flight_max;
    await Promise.all(Array.from({ length: 5 }, () => p.poll(running.operation_id)));
    assert.equal(p.largeReadStats.in_flight_max, before, 'a running operation is a small answer');
  });

  test('outputs larger than the limit are refused while reading (download and inline)', async () => {
    fake.scenario = { payloads: PAYLOADS };
    const small = provider({ outputGcsUri: 'gs://our-bucket/videos/', outputBytesMax: 10_000 });
    const { operation_id } = await small.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 } }));
    const status = await settle(small, operation_id);
    const out = status.state === 'succeeded' ? status.outputs[0]! : { ref: '', content_type: '' };
    await rejectsWith(small.fetchOutput(operation_id, out), { code: 'output_too_large', retryable: false });

    const inline = provider({ outputBytesMax: 10_000 });
    const second = await inline.submit(request({ params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 } }));
    await settle(inline, second.operation_id);
    await rejectsWith(inline.fetchOutput(second.operation_id, { ref: 'inline:0', content_type: 'video/mp4' }), {
      code: 'output_too_large',
      retryable: false,
    });
  });
});
