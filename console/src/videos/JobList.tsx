// The workspace's video jobs, newest first, a page at a time (the API's cursor pagination), filtered
// by status and model, refreshed by polling while a job on the page is pending. A finished job shows
// what it cost and what was refunded; a succeeded one plays its videos inline.
import { useCallback, useEffect, useRef, useState } from 'react';
import Badge from 'react-bootstrap/Badge';
import Button from 'react-bootstrap/Button';
import Card from 'react-bootstrap/Card';
import Col from 'react-bootstrap/Col';
import Form from 'react-bootstrap/Form';
import ProgressBar from 'react-bootstrap/ProgressBar';
import Row from 'react-bootstrap/Row';
import Spinner from 'react-bootstrap/Spinner';
import { api, type ListPage, type VideoJob } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { euros, when } from '../format';
import { Pager, useCursorPages } from '../Pager';

const PAGE_SIZE = 10;
const POLL_INTERVAL_MS = 1500;
const STATUS_VARIANT = { pending: 'secondary', succeeded: 'success', failed: 'danger' } as const;

type Videos = VideoJob['videos'];

/** Progress as a percentage, from a fraction (0-1) or a percentage, where the API reports one. */
function percentOf(progress: number | null | undefined): number | null {
  if (typeof progress !== 'number' || !Number.isFinite(progress)) return null;
  return Math.max(0, Math.min(100, Math.round(progress <= 1 ? progress * 100 : progress)));
}

function JobCard({
  job,
  videos,
  onChange,
  onError,
}: {
  job: VideoJob;
  videos: Videos;
  onChange: () => void;
  onError: (e: unknown) => void;
}) {
  const [busy, setBusy] = useState(false);
  const act = async (path: string, method: string) => {
    setBusy(true);
    try {
      await api(path, { method });
      onChange();
    } catch (err) {
      onError(err);
    } finally {
      setBusy(false);
    }
  };
  const percent = percentOf(job.progress);
  const p = job.params;
  const cancelled = job.error?.code === 'cancelled';
  return (
    <Card as="li" className="mb-3" aria-label={`Job ${job.id}`} data-job-id={job.id}>
      <Card.Body>
        <div className="d-flex flex-wrap justify-content-between gap-2">
          <div>
            <Badge bg={STATUS_VARIANT[job.status]} className="me-2 status">
              {cancelled ? 'cancelled' : job.status}
            </Badge>
            <strong>{job.model}</strong>
            <span className="ms-2 small text-body-secondary">{when(job.created)}</span>
          </div>
          <div>
            {job.status === 'pending' ? (
              <Button
                size="sm"
                variant="outline-warning"
                disabled={busy}
                onClick={() => act(`/v2/videos/generations/${job.id}/cancel`, 'POST')}
              >
                Cancel
              </Button>
            ) : (
              <Button size="sm" variant="outline-danger" disabled={busy} onClick={() => act(`/v2/videos/generations/${job.id}`, 'DELETE')}>
                Delete
              </Button>
            )}
          </div>
        </div>
        <p className="small mb-2 mt-1 text-body-secondary text-break">
          {p.durationSeconds} s · {p.resolution} · {p.aspectRatio} · {p.n} video{p.n > 1 ? 's' : ''} ·{' '}
          <span className="font-monospace">{job.id}</span>
        </p>
        <p className="mb-2 money">
          {job.status === 'pending' ? (
            <>Charged {euros(job.estimated_cost_in_euro)}</>
          ) : (
            <>
              Charged {euros(job.estimated_cost_in_euro)} · Cost {euros(job.cost_in_euro ?? 0)} ·{' '}
              <strong>Refunded {euros(job.refunded_in_euro)}</strong>
            </>
          )}
        </p>
        {job.status === 'pending' &&
          (percent !== null ? (
            <ProgressBar now={percent} label={`${percent}%`} aria-label="Progress" />
          ) : (
            <div className="small">
              <Spinner animation="border" size="sm" className="me-2" aria-hidden="true" />
              Generating…
            </div>
          ))}
        {job.status === 'failed' && job.error && (
          <p className="mb-0 text-danger-emphasis">
            {cancelled ? 'Cancelled: refunded in full.' : `Failed (${job.error.code}): ${job.error.message}`}
          </p>
        )}
        {job.status === 'succeeded' && (
          <Row xs={1} sm={2} className="g-2">
            {videos.map((v, i) => (
              <Col key={v.url}>
                <video
                  controls
                  preload="metadata"
                  src={v.url}
                  className="w-100 rounded bg-black"
                  aria-label={`Video ${i + 1} of job ${job.id}`}
                />
                <a href={v.url} download={`${job.id}-${i + 1}.mp4`} className="small">
                  Download video {i + 1}
                </a>
              </Col>
            ))}
            {videos.length < p.n && (
              <Col>
                <p className="small text-body-secondary">
                  {videos.length} of {p.n} videos delivered; the rest refunded.
                </p>
              </Col>
            )}
          </Row>
        )}
      </Card.Body>
    </Card>
  );
}

export function JobList({ modelIds, refreshToken }: { modelIds: string[]; refreshToken: number }) {
  const [status, setStatus] = useState('');
  const [model, setModel] = useState('');
  const pages = useCursorPages();
  const [jobs, setJobs] = useState<VideoJob[] | null>(null);
  const [hasMore, setHasMore] = useState(false);
  const [error, setError] = useState<unknown>(null);
  // Each fetch signs the video URLs anew; a video keeps the URL it was first shown with (until it is
  // about to expire), so that polling never reloads a playing video.
  const shownVideos = useRef(new Map<string, Videos>());

  // Only the answer to the latest request is shown (filters may change while a poll is under way).
  const latestRequest = useRef(0);
  const load = useCallback(async () => {
    const request = ++latestRequest.current;
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (status) q.set('status', status);
    if (model) q.set('model', model);
    if (pages.after) q.set('after', pages.after);
    try {
      const page = await api<ListPage<VideoJob>>(`/v2/videos/generations?${q}`);
      if (request !== latestRequest.current) return;
      setJobs(page.data);
      setHasMore(page.has_more ?? false);
      setError(null);
    } catch (err) {
      if (request === latestRequest.current) setError(err);
    }
  }, [status, model, pages.after]);

  // A new job (or new filters) shows the first page.
  const { reset } = pages;
  useEffect(() => {
    reset();
  }, [reset, refreshToken, status, model]);
  useEffect(() => {
    void load();
  }, [load, refreshToken]);
  const anyPending = jobs?.some((j) => j.status === 'pending') ?? false;
  useEffect(() => {
    if (!anyPending) return;
    const timer = setInterval(() => void load(), POLL_INTERVAL_MS);
    return () => clearInterval(timer);
  }, [anyPending, load]);

  const videosOf = (job: VideoJob): Videos => {
    const kept = shownVideos.current.get(job.id);
    if (kept && kept.length === job.videos.length && kept.every((v) => v.expires_at * 1000 > Date.now() + 60_000)) return kept;
    shownVideos.current.set(job.id, job.videos);
    return job.videos;
  };

  return (
    <section aria-labelledby="jobs-heading">
      <div className="d-flex flex-wrap align-items-end justify-content-between gap-2 mb-2">
        <h2 id="jobs-heading" className="h5 mb-0">
          Jobs
        </h2>
        <Row className="g-2 filters">
          <Form.Group as={Col} xs="auto" controlId="filter-status">
            <Form.Label className="small mb-0">Filter by status</Form.Label>
            <Form.Select size="sm" value={status} onChange={(e) => setStatus(e.target.value)}>
              <option value="">all</option>
              <option>pending</option>
              <option>succeeded</option>
              <option>failed</option>
            </Form.Select>
          </Form.Group>
          <Form.Group as={Col} xs="auto" controlId="filter-model">
            <Form.Label className="small mb-0">Filter by model</Form.Label>
            <Form.Select size="sm" value={model} onChange={(e) => setModel(e.target.value)}>
              <option value="">all</option>
              {modelIds.map((m) => (
                <option key={m}>{m}</option>
              ))}
            </Form.Select>
          </Form.Group>
        </Row>
      </div>
      <ErrorAlert error={error} />
      {jobs === null ? (
        <Spinner animation="border" role="status">
          <span className="visually-hidden">Loading jobs</span>
        </Spinner>
      ) : jobs.length === 0 ? (
        <p className="text-body-secondary">No jobs{status || model ? ' match these filters' : ' yet: generate a video'}.</p>
      ) : (
        <ol className="list-unstyled mb-2" aria-label="Video jobs">
          {jobs.map((job) => (
            <JobCard key={job.id} job={job} videos={videosOf(job)} onChange={() => void load()} onError={setError} />
          ))}
        </ol>
      )}
      <Pager pages={pages} hasMore={hasMore} lastId={jobs?.at(-1)?.id} />
    </section>
  );
}
