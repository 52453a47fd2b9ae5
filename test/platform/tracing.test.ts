// Tracing against a real collector (Jaeger, JAEGER_PATH): the real API and worker processes export their
// spans over OTLP; a video job on fal (its fake: HTTP calls, polls, a signed callback) is one trace across
// both services, found in Jaeger by its id, and the services' log lines carry its trace id. And without
// an OTLP endpoint, nothing of the OpenTelemetry SDK is loaded.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { FalFake } from '../fakes/fal-fake.js';
import { startElevenLabsFake, type ElevenLabsFake } from '../fakes/elevenlabs-fake.js';
import { freePort } from '../helpers/infra.js';
import { killAll, startEntryProcess } from '../helpers/processes.js';
import { findTraces, startJaeger, type Jaeger, type JaegerSpan } from '../helpers/jaeger.js';
import { createJob, klingJob } from '../helpers/provider-jobs.js';
import { http, infra, newCustomer, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { ELEVENLABS_PRESET_VOICES } from '../../src/providers/voice/elevenlabs.js';

const JAEGER_PATH = process.env['JAEGER_PATH'];
const JOB = 'video_job.id';
const SPEECH = 'speech_request.id';

describe('tracing', { skip: JAEGER_PATH ? false : 'JAEGER_PATH is not set (bash scripts/install-jaeger.sh builds Jaeger)' }, () => {
  let jaeger: Jaeger;
  let stack: Stack;
  const fal = new FalFake();
  let elevenlabs: ElevenLabsFake;
  const children: ChildProcess[] = [];
  let apiUrl = '';

  before(async () => {
    jaeger = await startJaeger(JAEGER_PATH!);
    await fal.start();
    elevenlabs = await startElevenLabsFake();
    // Completes by callback after a few polls have found it running.
    fal.defaultPlan = { complete_after_ms: 1_500 };
    stack = await startStack({ worker: false, env: { ...fal.env(), VIDEO_POLL_INTERVAL_MS: '300', VIDEO_POLL_MAX_INTERVAL_MS: '300' } });
    const port = await freePort();
    apiUrl = `http://127.0.0.1:${port}`;
    const env = {
      PUBLIC_BASE_URL: apiUrl,
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttpUrl,
      OTEL_BSP_SCHEDULE_DELAY: '1000',
    };
    const voice = { VOICE_PROVIDER: 'elevenlabs', ELEVENLABS_API_KEY: elevenlabs.apiKey, ELEVENLABS_BASE_URL: elevenlabs.url };
    await startEntryProcess(stack, 'api', { env: { ...env, ...voice, PORT: String(port) }, track: children });
    await startEntryProcess(stack, 'worker', { env, track: children });
  });

  after(async () => {
    killAll(children);
    await stack?.stop();
    await fal.stop();
    await elevenlabs?.close();
    await jaeger?.stop();
  });

  test('a job is one trace across the API and the worker: its create request, the workflow, activities, provider calls, PostgreSQL, polls and callback, each with video_job.id; the log lines carry its trace id', async (t) => {
    const { key } = await newCustomer({ baseUrl: apiUrl }, 10);
    const id = await createJob({ ...stack, baseUrl: apiUrl }, key, klingJob());
    const done = await waitForJob({ ...stack, baseUrl: apiUrl }, key, id, 60_000);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    assert.ok(fal.callbacks.length >= 1, 'fal called back');

    const expected: [string, (s: JaegerSpan) => boolean][] = [
      [
        'the create request (API, HTTP server)',
        (s) =>
          s.service === 'video-voice-api-api' &&
          s.tags['span.kind'] === 'server' &&
          /^POST /.test(s.operationName) &&
          s.tags['http.route'] === '/v2/videos/generations',
      ],
      [
        'the Temporal client start (API)',
        (s) => s.service === 'video-voice-api-api' && s.operationName === 'UpdateWithStartWorkflow:acceptJob',
      ],
      ['the workflow run (worker)', (s) => s.service === 'video-voice-api-worker' && s.operationName === 'RunWorkflow:videoJobWorkflow'],
      ['the submit activity (worker)', (s) => s.service === 'video-voice-api-worker' && s.operationName === 'RunActivity:submitVideoJob'],
      ['a PostgreSQL query (API)', (s) => s.service === 'video-voice-api-api' && s.tags['db.system'] === 'postgresql'],
      ['a PostgreSQL query (worker)', (s) => s.service === 'video-voice-api-worker' && s.tags['db.system'] === 'postgresql'],
      [
        'a provider HTTP call (worker, to fal)',
        (s) =>
          s.service === 'video-voice-api-worker' &&
          s.tags['span.kind'] === 'client' &&
          String(s.tags['url.full'] ?? '').startsWith(fal.url),
      ],
      ['a poll of the operation (worker)', (s) => s.service === 'video-voice-api-worker' && s.operationName === 'video operation poll'],
      ["fal's callback (API)", (s) => s.service === 'video-voice-api-api' && s.operationName === 'provider callback'],
    ];
    const { trace, missing } = await traceWith(jaeger, 'video-voice-api-api', [JOB, id], expected);
    const tree = describeTree(trace, JOB);
    t.diagnostic(`the job's trace:\n${tree}`);
    assert.deepEqual(missing, [], `spans with ${JOB}=${id} missing from the job's trace:\n${tree}`);
    const trace_id = trace[0]!.traceID;
    assert.ok(trace.every((s) => s.traceID === trace_id));

    const logs = (role: string) =>
      fs
        .readdirSync(infra().tmp)
        .filter((f) => f.startsWith(`${role}-`) && children.some((c) => f === `${role}-${c.pid}.log`))
        .flatMap((f) => fs.readFileSync(path.join(infra().tmp, f), 'utf8').split('\n'))
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const role of ['api', 'worker']) {
      const lines = logs(role).filter((l) => l['trace_id'] === trace_id);
      assert.ok(lines.length > 0, `a ${role} log line carries the job's trace id ${trace_id}`);
      assert.ok(
        lines.every((l) => typeof l['span_id'] === 'string' && trace.some((s) => s.spanID === l['span_id'])),
        `${role}: each such line names a span of the trace`,
      );
    }
  });

  test('a speech request is one trace: its HTTP request, the provider call, PostgreSQL and the encode, each with speech_request.id', async (t) => {
    const { key } = await newCustomer({ baseUrl: apiUrl }, 10);
    const r = await http(apiUrl, 'POST', '/v2/audio/speech', {
      token: key,
      json: { input: 'hello from a trace', voice: ELEVENLABS_PRESET_VOICES[0], response_format: 'mp3' },
    });
    assert.equal(r.status, 200);
    const id = r.headers.get('x-speech-request-id')!;
    assert.ok(id);
    const { trace, missing } = await traceWith(
      jaeger,
      'video-voice-api-api',
      [SPEECH, id],
      [
        ['the speech request (HTTP server)', (s) => s.tags['span.kind'] === 'server' && s.tags['http.route'] === '/v2/audio/speech'],
        [
          'the provider call (to ElevenLabs)',
          (s) => s.tags['span.kind'] === 'client' && String(s.tags['url.full'] ?? '').startsWith(elevenlabs.url),
        ],
        ['a PostgreSQL query', (s) => s.tags['db.system'] === 'postgresql'],
        ['the encode', (s) => s.operationName === 'speech encode'],
      ],
    );
    const tree = describeTree(trace, SPEECH);
    t.diagnostic(`the speech request's trace:\n${tree}`);
    assert.deepEqual(missing, [], `spans with ${SPEECH}=${id} missing from the request's trace:\n${tree}`);
  });
});

/** The trace in Jaeger with a span of `service` tagged `tag` that has all the expected spans (each with the tag), or the missing ones. */
async function traceWith(
  jaeger: Jaeger,
  service: string,
  tag: [string, string],
  expected: [string, (s: JaegerSpan) => boolean][],
): Promise<{ trace: JaegerSpan[]; missing: string[] }> {
  let trace: JaegerSpan[] = [];
  let missing: string[] = [];
  for (let i = 0; i < 100; i++) {
    const traces = await findTraces(jaeger, service, { [tag[0]]: tag[1] });
    trace = traces.find((spans) => spans.some(expected[0]![1])) ?? [];
    missing = expected.filter(([, is]) => !trace.some((s) => is(s) && s.tags[tag[0]] === tag[1])).map(([what]) => what);
    if (missing.length === 0) break;
    await sleep(200);
  }
  return { trace, missing };
}

/** The trace as an indented tree of "name (service)", for the diagnostics. */
function describeTree(spans: JaegerSpan[], tag: string): string {
  const ids = new Set(spans.map((s) => s.spanID));
  const lines: string[] = [];
  const walk = (parent: string | undefined, depth: number) => {
    const children = spans.filter((s) => (parent === undefined ? !s.parentSpanID || !ids.has(s.parentSpanID) : s.parentSpanID === parent));
    for (const s of children) {
      lines.push(`${'  '.repeat(depth)}${s.operationName} (${s.service})${s.tags[tag] ? '' : ` [no ${tag}]`}`);
      walk(s.spanID, depth + 1);
    }
  };
  walk(undefined, 0);
  return lines.join('\n');
}

test('without an OTLP endpoint, nothing of the OpenTelemetry SDK is loaded (the API, the worker and the logger imported); with one, it is', () => {
  const script = `
    import { createRequire } from 'node:module';
    const { startTelemetry } = await import('./src/telemetry/index.ts');
    await startTelemetry('all');
    await import('./src/runtime/api.ts');
    await import('./src/runtime/worker.ts');
    const { createLogger } = await import('./src/logger.ts');
    createLogger('silent', 'probe');
    // The API (the interface alone, no SDK) is prom-client's, loaded with the metrics in any case.
    const loaded = Object.keys(createRequire(import.meta.url).cache).filter((f) => /[\\\\/]@opentelemetry[\\\\/](?!api[\\\\/])|interceptors-opentelemetry/.test(f));
    process.stdout.write(JSON.stringify(loaded.length));
    process.exit(0);
  `;
  const run = (env: Record<string, string>) => {
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      env: { ...clean, ...env },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    return Number(r.stdout);
  };
  assert.equal(
    run({}),
    0,
    'no module of the SDK, its instrumentations or exporters, or the Temporal interceptors loaded without an endpoint',
  );
  assert.ok(run({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }) > 0, 'loaded with one');
});
