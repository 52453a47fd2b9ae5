// The one list of provider adapters. Outside src/providers/ nothing names a provider but this list and the
// catalog's value sets (src/models/values.ts): the config reads their variables through it, the runtime
// builds their adapters through it, and the configured set it makes is what the model lists, the OpenAPI
// document and the create read. A new provider is its adapter, its descriptor here and its catalog entries.
import { z } from 'zod';
import { SPEECH_PROVIDERS, type VideoBackend } from '../models/values.js';
import type { VideoProviderDescriptor, VoiceProviderDescriptor, VideoBuildContext, VoiceBuildContext } from './descriptor.js';
import type { VideoProvider } from './video/types.js';
import { VoiceProviderSet } from './voice/types.js';
import { simulatorVideoDescriptor } from './video/simulator.js';
import { vertexVeoDescriptor } from './video/vertex-veo.js';
import { falDescriptor } from './video/fal.js';
import { replicateDescriptor } from './video/replicate.js';
import { simulatorVoiceDescriptor } from './voice/simulator.js';
import { noVoiceDescriptor } from './voice/none.js';
import { elevenLabsDescriptor } from './voice/elevenlabs.js';
import { cartesiaDescriptor } from './voice/cartesia.js';

export type { VideoProviderDescriptor, VoiceProviderDescriptor } from './descriptor.js';

/** The video providers, in the order their adapters are built. Names are the catalog's VIDEO_BACKENDS (a test checks both ways). */
export const VIDEO_PROVIDERS: readonly VideoProviderDescriptor[] = [
  simulatorVideoDescriptor,
  vertexVeoDescriptor,
  falDescriptor,
  replicateDescriptor,
];

/** The voice providers VOICE_PROVIDERS (or VOICE_PROVIDER) selects from: the catalog's SPEECH_PROVIDERS and `none`. */
export const VOICE_PROVIDERS: readonly VoiceProviderDescriptor[] = [
  simulatorVoiceDescriptor,
  noVoiceDescriptor,
  elevenLabsDescriptor,
  cartesiaDescriptor,
];

/** VOICE_PROVIDERS: a comma list of speech providers, each once (`none` alone: no voice provider). */
const voiceProviderList = z
  .string()
  .transform((s) => s.split(',').map((x) => x.trim()))
  .pipe(
    z
      .array(z.enum([...SPEECH_PROVIDERS, 'none'], { error: `each must be one of ${[...SPEECH_PROVIDERS, 'none'].join(', ')}` }))
      .min(1)
      .refine((l) => new Set(l).size === l.length, 'names a provider twice')
      .refine((l) => !l.includes('none') || l.length === 1, '`none` cannot be listed with a provider'),
  );

/** Every provider's environment variables with their schemas, and VOICE_PROVIDER(S): the config validates them with its own. */
export const PROVIDERS_ENV: z.ZodRawShape = {
  ...simulatorVideoDescriptor.env,
  VOICE_PROVIDER: z.enum([...SPEECH_PROVIDERS, 'none']).optional(),
  VOICE_PROVIDERS: voiceProviderList.optional(),
  ...Object.assign({}, ...VOICE_PROVIDERS.map((d) => d.env)),
  ...Object.assign({}, ...VIDEO_PROVIDERS.map((d) => d.env)),
};

/** A provider this configuration enables, with its settings (secrets in properties never serialised). */
export interface Configured<D> {
  descriptor: D;
  settings: unknown;
}

/** The one configured set: which providers this process serves, and how each is set up. */
export interface ConfiguredProviders {
  /** The video providers enabled, in VIDEO_PROVIDERS' order. */
  video: readonly Configured<VideoProviderDescriptor>[];
  /**
   * The voice providers VOICE_PROVIDERS lists (or the one VOICE_PROVIDER names), in its order: the first is the
   * default of a clone. Default: the simulator's while it is on. Empty: none is configured (`none`).
   */
  voices: readonly Configured<VoiceProviderDescriptor>[];
}

/** The voice providers' names the environment selects (VOICE_PROVIDERS, else VOICE_PROVIDER, else the default); [] = none. */
function selectedVoiceProviders(env: Readonly<Record<string, unknown>>, simulatorOn: boolean): readonly string[] {
  const listed = (env['VOICE_PROVIDERS'] as string[] | undefined) ?? [
    (env['VOICE_PROVIDER'] as string | undefined) ?? (simulatorOn ? simulatorVoiceDescriptor.name : noVoiceDescriptor.name),
  ];
  return listed.filter((n) => n !== noVoiceDescriptor.name);
}

/**
 * The configured set from the validated environment (PROVIDERS_ENV's variables). Throws ConfigError, naming
 * the variable, on a bad combination. Voice settings are read first, then the video providers', each in its
 * list's order, so the first problem reported is the same whatever else is wrong.
 */
export function configureProviders(env: Readonly<Record<string, unknown>>, production: boolean): ConfiguredProviders {
  const simulator: VideoProviderDescriptor = simulatorVideoDescriptor;
  const simulatorOn = simulator.settings(env, { production, selected: true }) !== null;
  const names = selectedVoiceProviders(env, simulatorOn);
  const settingsByName = new Map<string, unknown>();
  for (const descriptor of VOICE_PROVIDERS) {
    settingsByName.set(descriptor.name, descriptor.settings(env, { production, selected: names.includes(descriptor.name) }));
  }
  const voices = names.map((name) => ({ descriptor: voiceDescriptorOf(name)!, settings: settingsByName.get(name) }));
  const video: Configured<VideoProviderDescriptor>[] = [];
  for (const descriptor of VIDEO_PROVIDERS) {
    const settings = descriptor.settings(env, { production, selected: true });
    if (settings !== null) video.push({ descriptor, settings });
  }
  return { video, voices };
}

/** The settings a descriptor was configured with, typed as its own; null when it is not configured. */
export function settingsOf<S>(
  configured: ConfiguredProviders,
  descriptor: VideoProviderDescriptor<S> | VoiceProviderDescriptor<S>,
): S | null {
  const found = descriptor.kind === 'voice' ? configured.voices : configured.video;
  const entry = found.find((c) => c.descriptor === (descriptor as unknown));
  return entry ? (entry.settings as S) : null;
}

/** The adapters of the configured video providers, by backend name. */
export function buildVideoProviders(configured: ConfiguredProviders, ctx: VideoBuildContext): Map<VideoBackend, VideoProvider> {
  return new Map(configured.video.map(({ descriptor, settings }) => [descriptor.name, descriptor.build(settings, ctx)]));
}

/** The adapters of the configured voice providers, in their configured order (the first is a clone's default). */
export function buildVoiceProviders(configured: ConfiguredProviders, ctx: VoiceBuildContext): VoiceProviderSet {
  return new VoiceProviderSet(configured.voices.map(({ descriptor, settings }) => descriptor.build(settings, ctx)));
}

/** The configured voice providers' names, in their order (the first is a clone's default); [] when none is. */
export const voiceProviderNames = (configured: ConfiguredProviders): readonly string[] => configured.voices.map((c) => c.descriptor.name);

/** The descriptor of a video backend the catalog names. */
export function videoDescriptorOf(name: VideoBackend): VideoProviderDescriptor {
  const d = VIDEO_PROVIDERS.find((p) => p.name === name);
  if (!d) throw new Error(`invariant: no video provider named ${name}`);
  return d;
}

/** The descriptor of a voice provider (a VOICE_PROVIDERS name or a speech model's provider); undefined for an unknown name. */
export const voiceDescriptorOf = (name: string): VoiceProviderDescriptor | undefined => VOICE_PROVIDERS.find((p) => p.name === name);
