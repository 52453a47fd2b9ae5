// A worker's limits, with their defaults (a leaf module: config reads it without loading the worker).
/**
 * What bounds a worker's memory and concurrency, whatever the number of jobs pending: workflows kept in
 * its cache (an evicted one is replayed from its short history when it next has work), and task slots.
 */
export interface WorkerLimits {
  maxCachedWorkflows: number;
  maxConcurrentWorkflowTaskExecutions: number;
  maxConcurrentActivityTaskExecutions: number;
  maxConcurrentLocalActivityExecutions: number;
}

export const DEFAULT_WORKER_LIMITS: WorkerLimits = {
  maxCachedWorkflows: 100,
  maxConcurrentWorkflowTaskExecutions: 40,
  maxConcurrentActivityTaskExecutions: 600,
  maxConcurrentLocalActivityExecutions: 40,
};

/**
 * Jobs a worker process awaits in process, polling their provider from one activity attempt each (about
 * 35 KiB and one activity slot a job); a job beyond it polls once per attempt, Temporal retrying the attempt
 * after the poll interval. Below the activity slots: settlements and copies need some.
 */
export const DEFAULT_MAX_AWAITING_IN_PROCESS = 500;
