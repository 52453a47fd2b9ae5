-- With tracing on, a job's trace context (a W3C traceparent) is kept with its operation, so that the
-- workers' polls and the providers' callbacks, which run outside the job's workflow, are spans of the
-- job's trace. Null without tracing (or for a job submitted before this column).
ALTER TABLE video_jobs ADD COLUMN trace_parent text CHECK (length(trace_parent) <= 512);
