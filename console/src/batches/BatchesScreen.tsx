// The workspace's batches, newest first, a page at a time (the API's cursor pagination), refreshed by
// polling (often while one on the page runs; otherwise now and then and when the tab is shown again, so
// that a batch made through the API appears without a reload): status, progress (requests completed and
// failed of the total), the money (reserved, cost, refunded), when it was created and ended, "Cancel" while it
// runs, and once it ended its output and error files, downloaded with the API key and saved as a file.
import { useCallback, useEffect, useRef, useState } from 'react';
import Badge from 'react-bootstrap/Badge';
import Button from 'react-bootstrap/Button';
import Card from 'react-bootstrap/Card';
import ProgressBar from 'react-bootstrap/ProgressBar';
import Spinner from 'react-bootstrap/Spinner';
import { api, apiRaw, type Batch, type ListPage } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { euros, when } from '../format';
import { Pager, useCursorPages } from '../Pager';

const PAGE_SIZE = 10;
/** How often the list is read again while a batch on the page runs, and while none does (a new one may be made through the API). */
const POLL_INTERVAL_MS = 1500;
const IDLE_POLL_INTERVAL_MS = 10_000;
const RUNNING: ReadonlySet<Batch['status']> = new Set(['validating', 'in_progress', 'cancelling']);
const STATUS_VARIANT: Record<Batch['status'], string> = {
  validating: 'secondary',
  in_progress: 'primary',
  cancelling: 'warning',
  completed: 'success',
  cancelled: 'secondary',
  expired: 'warning',
  failed: 'danger',
};

/** Fetches a file's content with the session's key and saves it through a temporary Blob link. */
async function download(fileId: string, name: string): Promise<void> {
  const blob = await (await apiRaw(`/v2/files/${fileId}/content`)).blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function BatchCard({ batch, onChange, onError }: { batch: Batch; onChange: () => void; onError: (e: unknown) => void }) {
  const [busy, setBusy] = useState(false);
  const run = async (action: () => Promise<unknown>, changes: boolean) => {
    setBusy(true);
    try {
      await action();
      if (changes) onChange();
    } catch (err) {
      onError(err);
    } finally {
      setBusy(false);
    }
  };
  const { total, completed, failed } = batch.request_counts;
  const share = (n: number) => (total ? (n / total) * 100 : 0);
  const running = RUNNING.has(batch.status);
  return (
    <Card as="li" className="mb-3" aria-label={`Batch ${batch.id}`} data-batch-id={batch.id}>
      <Card.Body>
        <div className="d-flex flex-wrap justify-content-between gap-2">
          <div>
            <Badge bg={STATUS_VARIANT[batch.status]} className="me-2 status">
              {batch.status.replace('_', ' ')}
            </Badge>
            <strong>
              {total} request{total === 1 ? '' : 's'}
            </strong>
            <span className="ms-2 small text-body-secondary">created {when(batch.created_at)}</span>
            {batch.completed_at !== null && <span className="ms-2 small text-body-secondary">ended {when(batch.completed_at)}</span>}
          </div>
          <div className="d-flex gap-2">
            {batch.status === 'in_progress' && (
              <Button
                size="sm"
                variant="outline-warning"
                disabled={busy}
                onClick={() => run(() => api(`/v2/batches/${batch.id}/cancel`, { method: 'POST' }), true)}
              >
                Cancel
              </Button>
            )}
            {(
              [
                ['output', batch.output_file_id, 'Download output', 'outline-primary'],
                ['errors', batch.error_file_id, 'Download errors', 'outline-danger'],
              ] as const
            ).map(
              ([kind, fileId, label, variant]) =>
                fileId && (
                  <Button
                    key={kind}
                    size="sm"
                    variant={variant}
                    disabled={busy}
                    onClick={() => run(() => download(fileId, `${batch.id}-${kind}.jsonl`), false)}
                  >
                    {label}
                  </Button>
                ),
            )}
          </div>
        </div>
        <p className="small mb-2 mt-1 text-body-secondary text-break">
          {batch.endpoint ?? 'inline requests'} · <span className="font-monospace">{batch.id}</span>
        </p>
        <ProgressBar aria-label="Progress" className="mb-1">
          <ProgressBar variant="success" now={share(completed)} key="completed" />
          <ProgressBar variant="danger" now={share(failed)} key="failed" />
        </ProgressBar>
        <p className="small mb-2 progress-counts">
          {completed} completed · {failed} failed · {total - completed - failed} left of {total}
          {running && <Spinner animation="border" size="sm" className="ms-2" aria-hidden="true" />}
        </p>
        <p className="mb-0 money">
          Reserved {euros(batch.reserved_in_euro)} · Cost {euros(batch.cost_in_euro)} ·{' '}
          <strong>Refunded {euros(batch.refunded_in_euro)}</strong>
        </p>
      </Card.Body>
    </Card>
  );
}

export function BatchesScreen() {
  const pages = useCursorPages();
  const [batches, setBatches] = useState<Batch[] | null>(null);
  const [hasMore, setHasMore] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const latestRequest = useRef(0);
  const load = useCallback(async () => {
    const request = ++latestRequest.current;
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (pages.after) q.set('after', pages.after);
    try {
      const page = await api<ListPage<Batch>>(`/v2/batches?${q}`);
      if (request !== latestRequest.current) return;
      setBatches(page.data);
      setHasMore(page.has_more ?? false);
      setError(null);
    } catch (err) {
      if (request === latestRequest.current) setError(err);
    }
  }, [pages.after]);

  useEffect(() => {
    void load();
  }, [load]);
  const anyRunning = batches?.some((b) => RUNNING.has(b.status)) ?? false;
  useEffect(() => {
    const refresh = () => {
      if (!document.hidden) void load();
    };
    const timer = setInterval(refresh, anyRunning ? POLL_INTERVAL_MS : IDLE_POLL_INTERVAL_MS);
    document.addEventListener('visibilitychange', refresh);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', refresh);
    };
  }, [anyRunning, load]);

  return (
    <section aria-labelledby="batches-heading">
      <h2 id="batches-heading" className="h5 mb-2">
        Batches
      </h2>
      <ErrorAlert error={error} />
      {batches === null ? (
        <Spinner animation="border" role="status">
          <span className="visually-hidden">Loading batches</span>
        </Spinner>
      ) : batches.length === 0 ? (
        <p className="text-body-secondary">No batches yet: create one with POST /v2/batches (see the API reference).</p>
      ) : (
        <ol className="list-unstyled mb-2" aria-label="Batches">
          {batches.map((b) => (
            <BatchCard key={b.id} batch={b} onChange={() => void load()} onError={setError} />
          ))}
        </ol>
      )}
      <Pager pages={pages} hasMore={hasMore} lastId={batches?.at(-1)?.id} />
    </section>
  );
}
