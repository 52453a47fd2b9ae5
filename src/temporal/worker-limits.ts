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
 * Provider polls a worker process's poller runs at once. A pending job holds nothing between its polls (a
 * row in video_job_polls), so this bounds the polls in flight, not the jobs pending.
 */
export const DEFAULT_CONCURRENT_POLLS_MAX = 50;
