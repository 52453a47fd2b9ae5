// A process with tracing on (the exporter and collector its environment names), for
// test/platform/trace-boundaries.test.ts: it serves one HTTP request a client sends with its own trace
// context to a signed /v2/files link, sends one webhook attempt inside a span, then flushes its spans
// and prints the client's trace id and the webhook's result as one JSON line.
import { randomBytes } from 'node:crypto';
import { shutdownTelemetry, startTelemetry } from '../../src/telemetry/index.js';

await startTelemetry('api');
const http = await import('node:http');
const { inSpan } = await import('../../src/telemetry/index.js');
const { sendWebhook } = await import('../../src/webhooks/sender.js');

const server = http.createServer((req, res) => {
  req.resume();
  res.end('ok');
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as { port: number }).port;
const client_trace_id = randomBytes(16).toString('hex');
const answer = await fetch(`http://127.0.0.1:${port}/v2/files/videos/job/0.mp4?expires=1900000000&signature=SIGNATURE-SECRET`, {
  headers: { traceparent: `00-${client_trace_id}-${randomBytes(8).toString('hex')}-01`, tracestate: 'client=1' },
});
await answer.text();
const webhook = await inSpan('deliver webhook', { 'webhook.url': `${process.env['RECEIVER_URL']}?token=TOKEN-SECRET` }, () =>
  sendWebhook({ url: process.env['RECEIVER_URL']!, headers: {}, body: '{}', policy: { production: false } }),
);
server.close();
await shutdownTelemetry();
process.stdout.write(JSON.stringify({ client_trace_id, webhook }) + '\n');
