// A provider's callback verification keys (fal's JWKS, Replicate's signing secret), fetched from the
// provider and cached. The keys held are used until they are older than `cache_ms`; a callback that the
// held keys do not verify asks for a refresh (the provider may have rotated them), granted at most once per
// `min_refresh_ms`. A fetch that fails is not tried again before its backoff has passed (doubling from
// `failure_backoff_ms` up to `failure_backoff_ms_max`), however many callbacks arrive meanwhile, and
// while it fails the keys held are used as they are (stale): a provider's key endpoint that is down makes
// no callback fail that the old keys verify, and forged callbacks cannot make this service call the
// provider (with its credentials) more than once per backoff interval.

export interface KeyCacheOptions {
  cache_ms: number;
  min_refresh_ms: number;
  failure_backoff_ms: number;
  failure_backoff_ms_max: number;
  now_ms: () => number;
}

/** The first wait after a failed fetch of a provider's keys; it doubles with each failure in a row. */
export const KEY_FETCH_BACKOFF_MS = 10_000;
/** The longest wait between fetches of a provider's keys that keep failing. */
export const KEY_FETCH_BACKOFF_MS_MAX = 5 * 60_000;

export class KeyCache<T> {
  #held: { keys: T; fetched_at_ms: number } | undefined;
  #failure: { at_ms: number; wait_ms: number; error: unknown } | undefined;
  #fetch: Promise<T> | undefined;

  constructor(
    private readonly fetchKeys: () => Promise<T>,
    private readonly opts: KeyCacheOptions,
  ) {}

  /** The keys to verify with; `refresh`: the held ones did not verify a callback. Throws only when none are held. */
  async get(refresh: boolean): Promise<T> {
    const now = this.opts.now_ms();
    const held = this.#held;
    const age_ms = held ? now - held.fetched_at_ms : Infinity;
    const wanted = !held || age_ms >= this.opts.cache_ms || (refresh && age_ms >= this.opts.min_refresh_ms);
    if (!wanted) return held.keys;
    const failure = this.#failure;
    if (failure && now < failure.at_ms + failure.wait_ms) {
      if (held) return held.keys;
      throw failure.error;
    }
    this.#fetch ??= this.fetchKeys()
      .then(
        (keys) => {
          this.#held = { keys, fetched_at_ms: this.opts.now_ms() };
          this.#failure = undefined;
          return keys;
        },
        (error: unknown) => {
          const wait_ms = failure ? Math.min(failure.wait_ms * 2, this.opts.failure_backoff_ms_max) : this.opts.failure_backoff_ms;
          this.#failure = { at_ms: this.opts.now_ms(), wait_ms, error };
          throw error;
        },
      )
      .finally(() => {
        this.#fetch = undefined;
      });
    try {
      return await this.#fetch;
    } catch (err) {
      if (this.#held) return this.#held.keys;
      throw err;
    }
  }
}
