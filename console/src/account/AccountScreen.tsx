// Account: the balance, the ledger statement a page at a time, and the webhook endpoints (add one,
// its signing secret shown once with a copy button; each endpoint's delivery attempts; delete).
import { useCallback, useEffect, useState } from 'react';
import Card from 'react-bootstrap/Card';
import Col from 'react-bootstrap/Col';
import Row from 'react-bootstrap/Row';
import Table from 'react-bootstrap/Table';
import { api, type LedgerEntry, type ListPage } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { euros, when } from '../format';
import { Pager, useCursorPages } from '../Pager';
import { Webhooks } from './Webhooks';

const PAGE_SIZE = 10;

function Ledger() {
  const pages = useCursorPages();
  const [entries, setEntries] = useState<LedgerEntry[]>([]);
  const [hasMore, setHasMore] = useState(false);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (pages.after) q.set('after', pages.after);
    api<ListPage<LedgerEntry>>(`/v2/ledger?${q}`).then((page) => {
      setEntries(page.data);
      setHasMore(page.has_more ?? false);
    }, setError);
  }, [pages.after]);
  return (
    <section aria-labelledby="ledger-heading">
      <h2 id="ledger-heading" className="h5">
        Statement
      </h2>
      <ErrorAlert error={error} />
      <Table responsive size="sm" striped className="align-middle">
        <thead>
          <tr>
            <th scope="col">Date</th>
            <th scope="col">Type</th>
            <th scope="col" className="text-end">
              Amount
            </th>
            <th scope="col" className="text-end">
              Balance after
            </th>
            <th scope="col">For</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((e) => (
            <tr key={e.id}>
              <td className="small text-nowrap">{when(e.created)}</td>
              <td>{e.type}</td>
              <td className="text-end text-nowrap">{`${e.type === 'charge' ? '−' : '+'}${euros(e.amount_in_euro)}`}</td>
              <td className="text-end text-nowrap">{euros(e.balance_after_in_euro)}</td>
              <td className="small font-monospace text-break">
                {e.job_id ? `job ${e.job_id}` : e.speech_request_id ? `speech ${e.speech_request_id}` : 'top-up'}
              </td>
            </tr>
          ))}
        </tbody>
      </Table>
      <Pager pages={pages} hasMore={hasMore} lastId={entries.at(-1)?.id} />
    </section>
  );
}

export function AccountScreen() {
  const [balance, setBalance] = useState<number | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = useCallback(() => {
    api<{ balance_in_euro: number }>('/v2/balance').then((b) => setBalance(b.balance_in_euro), setError);
  }, []);
  useEffect(load, [load]);
  return (
    <Row className="g-4">
      <Col lg={7}>
        <Card className="mb-4">
          <Card.Body>
            <label htmlFor="balance" className="d-block text-body-secondary">
              Balance
            </label>
            <output id="balance" className="display-6">
              {balance === null ? '…' : euros(balance)}
            </output>
            <ErrorAlert error={error} />
          </Card.Body>
        </Card>
        <Ledger />
      </Col>
      <Col lg={5}>
        <Webhooks />
      </Col>
    </Row>
  );
}
