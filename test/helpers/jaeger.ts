// Jaeger (v2, the all-in-one binary scripts/install-jaeger.sh builds; JAEGER_PATH) as a real OTLP
// collector for a test: OTLP over HTTP and gRPC, in-memory storage and the query API, on free ports.
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { projectPath } from '../../src/paths.js';
import { freePort } from './infra.js';

export interface Jaeger {
  /** OTLP over HTTP (the value of OTEL_EXPORTER_OTLP_ENDPOINT). */
  otlpHttpUrl: string;
  /** The query API (`/api/traces`, `/api/services`) and the UI. */
  queryUrl: string;
  stop(): Promise<void>;
}

export async function startJaeger(jaegerPath: string): Promise<Jaeger> {
  const [otlpGrpc, otlpHttp, queryGrpc, queryHttp] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const child: ChildProcess = spawn(jaegerPath, ['--config', projectPath('test', 'helpers', 'jaeger.yaml')], {
    env: {
      ...process.env,
      JAEGER_OTLP_GRPC_PORT: String(otlpGrpc),
      JAEGER_OTLP_HTTP_PORT: String(otlpHttp),
      JAEGER_QUERY_GRPC_PORT: String(queryGrpc),
      JAEGER_QUERY_HTTP_PORT: String(queryHttp),
      // Jaeger traces itself over OTLP to localhost:4317 unless told not to.
      OTEL_SDK_DISABLED: 'true',
      OTEL_TRACES_EXPORTER: 'none',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const queryUrl = `http://127.0.0.1:${queryHttp}`;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(5_000).then(() => child.kill('SIGKILL'))]);
  };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`jaeger exited (${child.exitCode}): ${output}`);
    const ready = await fetch(`${queryUrl}/api/services`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (i > 300) {
      await stop();
      throw new Error(`jaeger did not start: ${output}`);
    }
    await sleep(100);
  }
  return { otlpHttpUrl: `http://127.0.0.1:${otlpHttp}`, queryUrl, stop };
}

/** A span as the query API gives it (its process resolved to the service name). */
export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  service: string;
  parentSpanID: string | undefined;
  tags: Record<string, unknown>;
}

/** The traces (spans, with their services) that have a span of `service` with all the tags given. */
export async function findTraces(jaeger: Jaeger, service: string, tags: Record<string, string>): Promise<JaegerSpan[][]> {
  const url = new URL('/api/traces', jaeger.queryUrl);
  url.searchParams.set('service', service);
  url.searchParams.set('tags', JSON.stringify(tags));
  url.searchParams.set('lookback', '1h');
  url.searchParams.set('limit', '20');
  const r = await fetch(url);
  if (!r.ok) throw new Error(`jaeger query: ${r.status} ${await r.text()}`);
  const body = (await r.json()) as { data: { traceID: string; spans: any[]; processes: Record<string, { serviceName: string }> }[] | null };
  return (body.data ?? []).map((t) =>
    t.spans.map((s) => ({
      traceID: s.traceID,
      spanID: s.spanID,
      operationName: s.operationName,
      service: t.processes[s.processID]?.serviceName ?? '?',
      parentSpanID: (s.references as { refType: string; spanID: string }[]).find((ref) => ref.refType === 'CHILD_OF')?.spanID,
      tags: Object.fromEntries((s.tags as { key: string; value: unknown }[]).map((tag) => [tag.key, tag.value])),
    })),
  );
}
