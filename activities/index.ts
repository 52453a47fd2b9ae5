// Every activity the worker registers, built from the process's dependencies.
import { createVideoJobActivities, type VideoJobActivityDeps } from './video-job.js';
import { createVoiceActivities, type VoiceActivityDeps } from './voice.js';

export type ActivityDeps = VideoJobActivityDeps & VoiceActivityDeps;

export function createActivities(deps: ActivityDeps) {
  return { ...createVideoJobActivities(deps), ...createVoiceActivities(deps) };
}
