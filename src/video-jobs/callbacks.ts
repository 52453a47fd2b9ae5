// What the rest of the service knows of provider callbacks without their route (./callback-routes.ts):
// the URL a provider is given to call back for a job, and how many callbacks one API process takes.

/** How many callback requests and body reads one API process takes (each process limits on its own). */
export interface ProviderCallbackLimits {
  /** Callback bodies being read at once (all sources): with the backends' body limits, the memory they take. */
  reads_max: number;
  /** Of those, at most this many from one source address. */
  reads_per_source_max: number;
  /** Callback requests per minute from one source address (a burst of as many). */
  per_source_per_minute: number;
  /** A body not received within this is refused (408) and its read slot freed. */
  read_timeout_ms: number;
}

/**
 * The defaults: 32 reads of at most 1 MiB (Replicate's limit; fal's is 64 KiB) bound what callbacks hold
 * in memory to a few tens of MiB whatever is sent. 600 a minute per address is ten callbacks a second
 * from each of the providers' senders.
 */
export const PROVIDER_CALLBACK_LIMITS: ProviderCallbackLimits = {
  reads_max: 32,
  reads_per_source_max: 8,
  per_source_per_minute: 600,
  read_timeout_ms: 10_000,
};

/** The URL a provider is given to call back for a job: PUBLIC_BASE_URL (in development the API's own address). */
export function providerCallbackUrl(base_url: string, backend: string, job_id: string): string {
  return `${base_url.replace(/\/+$/, '')}/v2/provider-callbacks/${encodeURIComponent(backend)}/${encodeURIComponent(job_id)}`;
}
