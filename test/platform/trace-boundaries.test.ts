// What our traces take in and give out, with tracing on in a real process exporting OTLP (http/json) to
// a collector of the test's own: a client's traceparent neither picks our trace id nor our sampling
// unless its address is in TRACING_TRUSTED_CALLERS; no span keeps a signed URL's signature or any
// parameter named like a credential; a webhook attempt carries no traceparent, tracestate or baggage.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { redactedValue } from '../../src/telemetry/tracing.js';

interface OtlpSpan {
  traceId: string;
  name: string;
  kind: number;
}

/** A collector keeping every OTLP/JSON request body it receives, and a webhook receiver keeping the headers it got. */
function listen(handler: http.RequestListener): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer(handler);
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })),
  );
}

const bodies: string[] = [];
const received: http.IncomingHttpHeaders[] = [];
let collector: { server: http.Server; url: string };
let receiver: { server: http.Server; url: string };

before(async () => {
  collector = await listen((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      res.setHeader('content-type', 'application/json');
      res.end('{}');
    });
  });
  receiver = await listen((req, res) => {
    received.push(req.headers);
    req.resume();
    res.end();
  });
});
after(() => {
  collector.server.close();
  receiver.server.close();
});

/** Runs the child with tracing on; its output, and the spans the collector received from it. */
async function run(
  extraEnv: Record<string, string>,
): Promise<{ client_trace_id: string; webhook: { succeeded: boolean }; spans: OtlpSpan[]; raw: string }> {
  bodies.length = 0;
  received.length = 0;
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/trace-boundaries-child.ts'], {
    env: {
      ...process.env,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      RECEIVER_URL: receiver.url,
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, out);
  const raw = bodies.join('\n');
  const spans = bodies.flatMap((b) =>
    (JSON.parse(b) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] }).resourceSpans.flatMap((r) =>
      r.scopeSpans.flatMap((s) => s.spans),
    ),
  );
  return { ...JSON.parse(out.trim().split('\n').at(-1)!), spans, raw };
}

const SERVER = 2;

describe('trace boundaries', () => {
  test("an untrusted client's trace context is ignored, no span keeps a signature or token, and a webhook carries nothing of our traces", async () => {
    const r = await run({});
    const server = r.spans.find((s) => s.kind === SERVER);
    assert.ok(server, `a server span: ${r.spans.map((s) => s.name).join(', ')}`);
    assert.notEqual(server.traceId, r.client_trace_id, "the client's traceparent did not choose our trace");
    assert.ok(!r.spans.some((s) => s.traceId === r.client_trace_id), 'no span is in the client trace');
    assert.ok(r.raw.includes('/v2/files/videos/job/0.mp4'), 'the path is kept');
    assert.ok(!r.raw.includes('SIGNATURE-SECRET'), 'no span keeps the signature');
    assert.ok(!r.raw.includes('TOKEN-SECRET'), 'no span keeps a token');
    assert.equal(r.webhook.succeeded, true);
    assert.equal(received.length, 1);
    for (const h of ['traceparent', 'tracestate', 'baggage']) assert.equal(received[0]![h], undefined, `the webhook has no ${h}`);
  });

  test("a trusted caller's trace context is followed", async () => {
    const r = await run({ TRACING_TRUSTED_CALLERS: '127.0.0.0/8, ::1' });
    const server = r.spans.find((s) => s.kind === SERVER);
    assert.equal(server?.traceId, r.client_trace_id);
    assert.ok(!r.raw.includes('SIGNATURE-SECRET'));
  });

  test('redaction: URL query strings and credential-like parameters, in any attribute', () => {
    assert.equal(redactedValue('url.full', 'https://cdn.example/v.mp4?X-Goog-Signature=abc&x=1'), 'https://cdn.example/v.mp4?REDACTED');
    assert.equal(redactedValue('http.target', '/v2/files/a.mp4?expires=1&signature=abc'), '/v2/files/a.mp4?REDACTED');
    assert.equal(redactedValue('url.query', 'expires=1&signature=abc'), 'REDACTED');
    assert.equal(
      redactedValue('exception.message', 'GET /v2/files/a?expires=1&signature=abc failed'),
      'GET /v2/files/a?expires=1&signature=REDACTED failed',
    );
    assert.equal(redactedValue('http.route', '/v2/videos/generations'), '/v2/videos/generations');
  });
});
