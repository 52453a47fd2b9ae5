// How the benchmark itself reaches the run's Temporal: as the service does, from Temporal's client
// variables (the dev server needs only its address; temporal-server, TLS and a client certificate).
import type { Infra } from '../test/helpers/infra.js';
import { loadTemporalSettings, type TemporalConnectOptions } from '../src/temporal/connection-config.js';

export function benchConnectOptions(infra: Pick<Infra, 'temporalAddress' | 'temporalEnv'>): TemporalConnectOptions {
  return loadTemporalSettings(infra.temporalEnv ?? { TEMPORAL_ADDRESS: infra.temporalAddress }).connect;
}
