// Whether an API process should receive traffic (GET /readyz, the chart's readiness probe), and
// Temporal's health as this process sees it (the temporal_reachable gauge).
//
// Ready means the process answers and PostgreSQL does: every read, download, callback and speech request
// needs PostgreSQL and nothing else. Temporal is not part of it: while Temporal is away, status reads,
// downloads and callbacks still work, and creates answer their documented 503 (nothing charged); taking
// every API pod out of the Service for it would fail all of them at the ingress. Temporal's health is
// checked in the background instead (one DescribeNamespace per interval, whatever the traffic) and
// exported as a gauge for an alert (deploy/prometheus/alerts.yaml, TemporalUnreachable).
//
// The PostgreSQL check is cached for READY_CACHE_MS and shared by concurrent probes: public /readyz hits
// cost at most one `SELECT 1` per READY_CACHE_MS, and never a Temporal RPC.
import { Gauge } from 'prom-client';
import { registry } from '../metrics.js';

/** How long one PostgreSQL check answers /readyz. */
export const READY_CACHE_MS = 1_500;
/** Between two checks of Temporal. */
export const TEMPORAL_CHECK_INTERVAL_MS = 10_000;
/** How long a check of Temporal waits for its answer. */
export const TEMPORAL_CHECK_TIMEOUT_MS = 2_000;

export interface ReadinessDeps {
  /** One round trip to PostgreSQL (rejects when it is unreachable). */
  database: () => Promise<unknown>;
  /** One round trip to Temporal (rejects when it is unreachable or refuses us), within `timeout_ms`. */
  temporal: (timeout_ms: number) => Promise<unknown>;
  cache_ms?: number;
  temporal_interval_ms?: number;
}

/** The gauge, registered by the first API process that checks Temporal (a worker-only process has none). */
function temporalReachableGauge(): Gauge {
  const existing = registry.getSingleMetric('temporal_reachable');
  if (existing) return existing as Gauge;
  return new Gauge({
    name: 'temporal_reachable',
    help: 'Whether this API process reached Temporal at its last check (1) or not (0); checked every 10 s',
    registers: [registry],
  });
}

export class Readiness {
  private checked_at_ms = -Infinity;
  private checking: Promise<boolean> | null = null;
  private last = false;
  private timer: NodeJS.Timeout | undefined;
  private temporal_ok: boolean | null = null;
  private readonly cache_ms: number;

  constructor(private readonly deps: ReadinessDeps) {
    this.cache_ms = deps.cache_ms ?? READY_CACHE_MS;
  }

  /** Whether PostgreSQL answered, checked at most once per cache period. */
  ready(): Promise<boolean> {
    if (this.checking) return this.checking;
    if (performance.now() - this.checked_at_ms < this.cache_ms) return Promise.resolve(this.last);
    this.checking = this.deps
      .database()
      .then(
        () => true,
        () => false,
      )
      .then((ok) => {
        this.last = ok;
        this.checked_at_ms = performance.now();
        this.checking = null;
        return ok;
      });
    return this.checking;
  }

  /** Whether Temporal answered the last check (null: not checked yet). */
  temporalReachable(): boolean | null {
    return this.temporal_ok;
  }

  /** Starts the background checks of Temporal, the first one now. */
  start(): void {
    if (this.timer) return;
    const gauge = temporalReachableGauge();
    const check = async () => {
      const ok = await this.deps.temporal(TEMPORAL_CHECK_TIMEOUT_MS).then(
        () => true,
        () => false,
      );
      this.temporal_ok = ok;
      gauge.set(ok ? 1 : 0);
    };
    void check();
    this.timer = setInterval(() => void check(), this.deps.temporal_interval_ms ?? TEMPORAL_CHECK_INTERVAL_MS).unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
