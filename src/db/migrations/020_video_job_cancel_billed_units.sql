-- A cancelled job is charged only for the provider's requests that the cancel stopped while they ran: the
-- settlement records how many (unit price x that count is kept), and the ledger audit checks the cost
-- against it. NULL for every job settled otherwise, and for jobs the previous release settled (it does not
-- write the column): a nullable column without a default suits both releases.
ALTER TABLE video_jobs ADD COLUMN cancel_billed_units integer;
