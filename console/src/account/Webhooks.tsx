// Webhook endpoints: add one (its signing secret is shown once, with a copy button), list them, show
// an endpoint's delivery attempts, delete one.
import { useCallback, useEffect, useState, type FormEvent } from 'react';
import Alert from 'react-bootstrap/Alert';
import Button from 'react-bootstrap/Button';
import Form from 'react-bootstrap/Form';
import InputGroup from 'react-bootstrap/InputGroup';
import Table from 'react-bootstrap/Table';
import { api, type DeliveryAttempt, type ListPage, type WebhookEndpoint, type WebhookEndpointCreated } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { when } from '../format';
import { Pager, useCursorPages } from '../Pager';
import { Panel, useAction } from '../ui';

function Deliveries({ endpointId }: { endpointId: string }) {
  const pages = useCursorPages();
  const [attempts, setAttempts] = useState<DeliveryAttempt[] | null>(null);
  const [hasMore, setHasMore] = useState(false);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    const q = new URLSearchParams({ limit: '10' });
    if (pages.after) q.set('after', pages.after);
    api<ListPage<DeliveryAttempt>>(`/v2/webhooks/${endpointId}/deliveries?${q}`).then((page) => {
      setAttempts(page.data);
      setHasMore(page.has_more ?? false);
    }, setError);
  }, [endpointId, pages.after]);
  if (error) return <ErrorAlert error={error} />;
  if (!attempts) return null;
  if (attempts.length === 0)
    return (
      <p className="small text-body-secondary mb-0">
        No deliveries yet: events are sent when a video job finishes or a budget alert goes off.
      </p>
    );
  return (
    <>
      <Table responsive size="sm" className="small mb-1">
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Event</th>
            <th scope="col">Attempt</th>
            <th scope="col">Result</th>
          </tr>
        </thead>
        <tbody>
          {attempts.map((a) => (
            <tr key={a.id}>
              <td className="text-nowrap">{when(a.created)}</td>
              <td>{a.event_type}</td>
              <td>{a.attempt}</td>
              <td>
                {a.status}
                {a.http_status !== null ? ` (HTTP ${a.http_status})` : ''}
                {a.error ? `: ${a.error}` : ''} · delivery {a.delivery_status}
              </td>
            </tr>
          ))}
        </tbody>
      </Table>
      <Pager pages={pages} hasMore={hasMore} lastId={attempts.at(-1)?.id} />
    </>
  );
}

function Endpoint({ endpoint, onDeleted, onError }: { endpoint: WebhookEndpoint; onDeleted: () => void; onError: (e: unknown) => void }) {
  const [open, setOpen] = useState(false);
  async function remove() {
    try {
      await api(`/v2/webhooks/${endpoint.id}`, { method: 'DELETE' });
      onDeleted();
    } catch (err) {
      onError(err);
    }
  }
  return (
    <li className="border rounded p-2 mb-2" aria-label={`Webhook ${endpoint.url}`}>
      <div className="text-break fw-semibold">{endpoint.url}</div>
      <div className="small text-body-secondary">
        {endpoint.events.join(', ')} · added {when(endpoint.created)}
      </div>
      <div className="d-flex gap-2 mt-2">
        <Button size="sm" variant="outline-secondary" aria-expanded={open} onClick={() => setOpen((o) => !o)}>
          {open ? 'Hide deliveries' : 'Deliveries'}
        </Button>
        <Button size="sm" variant="outline-danger" onClick={remove}>
          Delete
        </Button>
      </div>
      {open && (
        <div className="mt-2">
          <Deliveries endpointId={endpoint.id} />
        </div>
      )}
    </li>
  );
}

export function Webhooks() {
  const [endpoints, setEndpoints] = useState<WebhookEndpoint[]>([]);
  const [url, setUrl] = useState('');
  const [secret, setSecret] = useState<{ url: string; secret: string } | null>(null);
  const [copied, setCopied] = useState(false);
  const { busy, error, setError, run } = useAction();
  const load = useCallback(() => {
    api<ListPage<WebhookEndpoint>>('/v2/webhooks').then((page) => setEndpoints(page.data), setError);
  }, []);
  useEffect(load, [load]);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const created = await api<WebhookEndpointCreated>('/v2/webhooks', { method: 'POST', json: { url } });
      setSecret({ url: created.url, secret: created.secret });
      setCopied(false);
      setUrl('');
      load();
    });
  };

  async function copy() {
    if (!secret) return;
    try {
      await navigator.clipboard.writeText(secret.secret);
      setCopied(true);
    } catch (err) {
      setError(new Error(`the browser did not allow copying (${(err as Error).message}); select the secret and copy it by hand`));
    }
  }

  return (
    <Panel id="webhooks" title="Webhooks">
      <Form onSubmit={submit} className="mb-3">
        <Form.Group className="mb-2" controlId="webhook-url">
          <Form.Label>Webhook URL</Form.Label>
          <Form.Control
            type="url"
            required
            maxLength={2048}
            value={url}
            onChange={(e) => setUrl(e.target.value)}
            placeholder="https://example.com/hooks/video"
          />
        </Form.Group>
        <Button type="submit" disabled={busy}>
          Add webhook
        </Button>
      </Form>
      {secret && (
        <Alert variant="success" dismissible onClose={() => setSecret(null)}>
          <p className="mb-2">Endpoint added. Its signing secret is shown this once: keep it to verify deliveries.</p>
          <Form.Group controlId="webhook-secret">
            <Form.Label className="small mb-1">Signing secret</Form.Label>
            <InputGroup>
              <Form.Control readOnly value={secret.secret} className="font-monospace" onFocus={(e) => e.target.select()} />
              <Button variant="outline-secondary" onClick={copy}>
                {copied ? 'Copied' : 'Copy secret'}
              </Button>
            </InputGroup>
          </Form.Group>
        </Alert>
      )}
      <ErrorAlert error={error} />
      {endpoints.length === 0 ? (
        <p className="text-body-secondary mb-0">No webhook endpoints.</p>
      ) : (
        <ul className="list-unstyled mb-0" aria-label="Webhook endpoints">
          {endpoints.map((e) => (
            <Endpoint key={e.id} endpoint={e} onDeleted={load} onError={setError} />
          ))}
        </ul>
      )}
    </Panel>
  );
}
