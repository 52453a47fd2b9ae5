-- The images of a video job's create attempts live in the storage the videos use (DATA_DIR/storage or
-- the S3 bucket), under inputs/<job id>/<attempt id>/: the row names them (image_key, last_frame_key).
-- A discarded image (a refused attempt, a deleted job) then frees its space at once, instead of leaving
-- dead tuples and WAL behind. Rows written before keep their bytes in image / last_frame and are read
-- (and deleted) as they are; every row has each image in exactly one of the two places.
ALTER TABLE video_job_inputs ADD COLUMN image_key text;
ALTER TABLE video_job_inputs ADD COLUMN last_frame_key text;
ALTER TABLE video_job_inputs ALTER COLUMN image DROP NOT NULL;
ALTER TABLE video_job_inputs DROP CONSTRAINT IF EXISTS video_job_inputs_check;
ALTER TABLE video_job_inputs ADD CONSTRAINT video_job_inputs_image_in_one_place CHECK ((image IS NULL) <> (image_key IS NULL));
ALTER TABLE video_job_inputs ADD CONSTRAINT video_job_inputs_last_frame_in_one_place
  CHECK (NOT (last_frame IS NOT NULL AND last_frame_key IS NOT NULL) AND (last_frame IS NULL AND last_frame_key IS NULL) = (last_frame_mime_type IS NULL));
