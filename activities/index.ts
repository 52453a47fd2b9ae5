// Every activity the worker registers, built from the process's dependencies.
import { createVideoJobActivities, type VideoJobActivityDeps } from './video-job.js';

export type ActivityDeps = VideoJobActivityDeps;

export function createActivities(deps: ActivityDeps) {
  return { ...createVideoJobActivities(deps) };
}
