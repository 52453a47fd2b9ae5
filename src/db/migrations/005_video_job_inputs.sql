-- The images a video job was created with (first frame, last frame), kept with the job rather than in
-- its workflow's history: the API writes them before the workflow starts, keyed by the job id, and the
-- submit activity reads them back, so every submission of the job (retries, resumption after a crash)
-- sends the same bytes. The job's row in video_jobs does not exist yet when they are written (the
-- workflow's charge step creates it), hence no foreign key to it. Written once, never updated.
CREATE TABLE video_job_inputs (
  job_id                uuid PRIMARY KEY,
  workspace_id          uuid NOT NULL REFERENCES workspaces(id),
  image                 bytea NOT NULL CHECK (octet_length(image) BETWEEN 1 AND 8388608),
  image_mime_type       text NOT NULL CHECK (image_mime_type IN ('image/png', 'image/jpeg', 'image/webp')),
  last_frame            bytea CHECK (octet_length(last_frame) BETWEEN 1 AND 8388608),
  last_frame_mime_type  text CHECK (last_frame_mime_type IN ('image/png', 'image/jpeg', 'image/webp')),
  created_at            timestamptz NOT NULL DEFAULT now(),
  CHECK ((last_frame IS NULL) = (last_frame_mime_type IS NULL))
);
