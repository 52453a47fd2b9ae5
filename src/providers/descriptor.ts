// What a provider adapter says about itself: its name and kind, the environment variables it reads (its own
// zod schemas and defaults), how its settings come from them (secrets in properties that are never
// serialised or logged), how it is built, and what it can do. Each adapter exports one descriptor; the
// registry (./registry.ts) lists them, and the config, the runtime and the model lists read them there.
import { z } from 'zod';
import { ConfigError } from '../config-error.js';
import type { Db } from '../db/pool.js';
import type { SpeechProvider, VideoBackend } from '../models/values.js';
import type { VideoModelBackend } from '../models/catalog-types.js';
import type { VideoProvider } from './video/types.js';
import type { ProviderSpeechFormat, VoiceProvider } from './voice/types.js';

/** Whatever every provider's settings are read with: is this a production process. */
export interface SettingsContext {
  production: boolean;
  /** For a voice provider: whether VOICE_PROVIDER selects it (its required settings are then required). */
  selected: boolean;
}

/** The catalog as a video adapter reads it (given by the runtime, so adapters import no catalog code). */
export interface VideoCatalogView {
  /** Whether requests of this model may steer the simulator's outcome (`parameters.simulate`). */
  acceptsParameters(model: string): boolean;
  /** The catalog's entry of `backend` for a model id (a retired id resolving to its replacement); undefined = not served there. */
  backendFor(model: string, backend: VideoBackend): VideoModelBackend | undefined;
}

export interface VideoBuildContext {
  db: Db;
  catalog: VideoCatalogView;
}

export interface VoiceBuildContext {
  db: Db;
}

/** What a video provider can do, as the service relies on it. */
export interface VideoCapabilities {
  /** It calls back when an operation ends (verifyCallback, callbackReception, callbackConcerns); polls then back off further. */
  callbacks: boolean;
  /**
   * What the provider bills of an operation cancelled while it runs (its cancel answer says so per request):
   * the requests that had started (`started_requests`), `nothing`, or what the request's simulate parameters ask (`as_requested`).
   */
  cancel_bills: 'started_requests' | 'nothing' | 'as_requested';
  /** A request's `parameters.<name>` this provider reads (for the models whose catalog entry accepts parameters); null = none. */
  parameters: ProviderParameters | null;
  /** What its adapter holds in memory at most in a worker, beyond the copies every adapter's outputs take (its caches). */
  memory_held: readonly { what: string; bytes: number }[];
}

/** A request's `parameters.<name>` a provider reads: validated at the create and stated in the OpenAPI document. */
export interface ProviderParameters {
  name: string;
  schema: z.ZodType;
  /** What the schema cannot say: a problem of the parsed value for a job of `n` videos (its field, and why), or null. */
  problem(value: unknown, n: number): { field: string; message: string } | null;
}

/** What a voice provider can do: none of it has a default, so a new provider states each. */
export interface VoiceCapabilities {
  /** Its named voices usable by every workspace without cloning (listed with its speech models). */
  preset_voices: readonly string[];
  /** The sample rate of its PCM (s16le mono); null for `none`, which speaks nothing. */
  pcm_rate_hz: number | null;
  /** What it returns whole; the API's other formats are encoded from its PCM. */
  formats: readonly ProviderSpeechFormat[];
  /** The voice the API document's speech example names; null = a cloned voice's placeholder. */
  example_voice: string | null;
}

interface DescriptorBase<E extends z.ZodRawShape, S> {
  /** Its environment variables, each with its schema and default: validated with every other variable at startup. */
  env: E;
  /** Its settings from its parsed variables; null when they leave it off. Throws ConfigError on a bad combination. */
  settings(env: z.infer<z.ZodObject<E>>, ctx: SettingsContext): S | null;
}

export interface VideoProviderDescriptor<S = unknown, E extends z.ZodRawShape = z.ZodRawShape> extends DescriptorBase<E, S> {
  kind: 'video';
  /** Its backend name, as the catalog's `backends:` name it. */
  name: VideoBackend;
  capabilities: VideoCapabilities;
  build(settings: S, ctx: VideoBuildContext): VideoProvider;
}

export interface VoiceProviderDescriptor<S = unknown, E extends z.ZodRawShape = z.ZodRawShape> extends DescriptorBase<E, S> {
  kind: 'voice';
  /** Its VOICE_PROVIDER value, as the catalog's speech models name it (`none`: no voice provider). */
  name: SpeechProvider | 'none';
  capabilities: VoiceCapabilities;
  build(settings: S, ctx: VoiceBuildContext): VoiceProvider;
}

/** A descriptor with its types checked where it is written (its settings from its own variables). */
export const videoProvider = <E extends z.ZodRawShape, S>(d: VideoProviderDescriptor<S, E>): VideoProviderDescriptor<S, E> => d;
export const voiceProvider = <E extends z.ZodRawShape, S>(d: VoiceProviderDescriptor<S, E>): VoiceProviderDescriptor<S, E> => d;

/** A switch: on/off, true/false or 1/0. */
export const boolish = z.enum(['on', 'off', 'true', 'false', '1', '0']).transform((v) => v === 'on' || v === 'true' || v === '1');

/** A credential's format: printable characters without spaces (a stray newline is the usual mistake). */
export const credential = () =>
  z.string().regex(/^[\x21-\x7e]+$/, 'must be printable characters without spaces (check for a stray newline)');

/** Sets `key` on `settings` as a property that JSON, inspection and logs never show. */
export function hideSecret<T extends object>(settings: T, key: keyof T & string, value: unknown): T {
  Object.defineProperty(settings, key, { value, enumerable: false });
  return settings;
}

/** Credentials only travel over TLS, except to a local fake: an https:// URL, or http:// to this machine; no trailing slash. */
export function secureEndpoint(name: string, url: string): string {
  const u = new URL(url);
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname);
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && loopback)) {
    throw new ConfigError(`invalid environment variable ${name}: must be an https:// URL (http:// only to localhost)`);
  }
  return url.replace(/\/+$/, '');
}
