// What the Vertex AI Veo adapter (./vertex-veo.ts) keeps between calls: where its OAuth 2.0 access
// tokens come from (Google's auth library caches and refreshes them), and the finished operations whose
// videos came inline, decoded once and kept for the copies of their outputs and any re-poll.
import type { GoogleAuth } from 'google-auth-library';
import type { ProviderError, VideoOperationStatus } from './types.js';

export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

/** Where the adapter gets its OAuth 2.0 access token; asked before every request (it caches and refreshes). */
export interface AccessTokenSource {
  getAccessToken(): Promise<string>;
}

/** Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud ADC, workload identity, metadata server). */
export function googleAuthTokenSource(): AccessTokenSource {
  let auth: Promise<GoogleAuth> | undefined;
  return {
    async getAccessToken() {
      auth ??= import('google-auth-library').then(({ GoogleAuth }) => new GoogleAuth({ scopes: CLOUD_PLATFORM_SCOPE }));
      const token = await (await auth).getAccessToken();
      if (!token) throw new Error('Application Default Credentials returned no access token');
      return token;
    },
  };
}

/** A fixed token (VERTEX_ACCESS_TOKEN): for tests and local use only; such tokens expire after about an hour. */
export function staticTokenSource(token: string): AccessTokenSource {
  return { getAccessToken: async () => token };
}

/**
 * Finished operations' inline videos, decoded once and kept (least recently used first out, at most
 * this many bytes) for the copies of their outputs and any re-poll: each is then read from Vertex once,
 * not once per poll and again per output.
 */
export const INLINE_VIDEO_CACHE_BYTES_MAX = 128 * 1024 * 1024;

/** A finished operation as poll reported it, with its inline videos decoded (or why one cannot be delivered). */
export interface FinishedOperation {
  status: VideoOperationStatus;
  videos: (Buffer | ProviderError | null)[];
  bytes: number;
}

/** Finished operations by name, least recently used first out, at most INLINE_VIDEO_CACHE_BYTES_MAX of videos. */
export class FinishedOperationCache {
  private readonly finished = new Map<string, FinishedOperation>();
  private bytes = 0;

  /** Keeps `entry` (when it fits at all), dropping the least recently used ones past the bound. */
  put(name: string, entry: FinishedOperation): void {
    if (entry.bytes > INLINE_VIDEO_CACHE_BYTES_MAX) return;
    this.finished.set(name, entry);
    this.bytes += entry.bytes;
    for (const [key, e] of this.finished) {
      if (this.bytes <= INLINE_VIDEO_CACHE_BYTES_MAX) break;
      this.finished.delete(key);
      this.bytes -= e.bytes;
    }
  }

  /** The finished operation of this name (now the most recently used), if any. */
  get(name: string): FinishedOperation | undefined {
    const entry = this.finished.get(name);
    if (entry) {
      this.finished.delete(name);
      this.finished.set(name, entry);
    }
    return entry;
  }
}
