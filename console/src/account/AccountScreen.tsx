// Account: the balance (and what is owed), buying credits with Stripe Checkout and automatic top-up
// (./Credits.tsx; without Stripe on the service, said so), the low balance alert, the ledger statement a
// page at a time, and the webhook endpoints (add one, its signing secret shown once with a copy button; each endpoint's
// delivery attempts; delete).
import { useCallback, useEffect, useState, type FormEvent } from 'react';
import Button from 'react-bootstrap/Button';
import Card from 'react-bootstrap/Card';
import Col from 'react-bootstrap/Col';
import Form from 'react-bootstrap/Form';
import Row from 'react-bootstrap/Row';
import Table from 'react-bootstrap/Table';
import { api, type Account, type LedgerEntry, type ListPage } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { euros, when } from '../format';
import { Pager, useCursorPages } from '../Pager';
import { EuroInput, useAction } from '../ui';
import { AddCredits, AutoTopUp, CreditsNotConfigured } from './Credits';
import { Webhooks } from './Webhooks';

/** The highest alert the API takes, in euros. */
const LOW_BALANCE_ALERT_MAX = 1_000_000;

/** The low balance alert: the webhook event balance.low is sent when a charge leaves the balance below it; empty = off. */
function LowBalanceAlert({ account, onSaved }: { account: Account; onSaved: (a: Account) => void }) {
  const current = account.low_balance_threshold_in_euro;
  const [value, setValue] = useState(current === null ? '' : String(current));
  const [saved, setSaved] = useState(false);
  const { busy, error, run } = useAction();
  useEffect(() => setValue(current === null ? '' : String(current)), [current]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setSaved(false);
    void run(async () => {
      const low_balance_threshold_in_euro = value.trim() === '' ? null : Number(value);
      onSaved(await api<Account>('/v2/account', { method: 'PATCH', json: { low_balance_threshold_in_euro } }));
      setSaved(true);
    });
  };
  return (
    <Form onSubmit={submit} className="mt-3">
      <Form.Group controlId="low-balance-alert">
        <Form.Label className="text-body-secondary mb-1">Low balance alert</Form.Label>
        <EuroInput
          min={0}
          max={LOW_BALANCE_ALERT_MAX}
          step="any"
          placeholder="Off"
          value={value}
          onChange={(v) => {
            setValue(v);
            setSaved(false);
          }}
          describedBy="low-balance-alert-help"
        >
          <Button type="submit" variant="outline-primary" disabled={busy}>
            Save alert
          </Button>
        </EuroInput>
        <Form.Text id="low-balance-alert-help">
          {saved ? 'Saved. ' : ''}
          Webhooks subscribed to balance.low are sent an event when a charge takes the balance below this amount; empty turns it off.
        </Form.Text>
      </Form.Group>
      <ErrorAlert error={error} />
    </Form>
  );
}

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
              <td className="text-end text-nowrap">{`${e.type === 'charge' || e.type === 'debit' ? '−' : '+'}${euros(e.amount_in_euro)}`}</td>
              <td className="text-end text-nowrap">{euros(e.balance_after_in_euro)}</td>
              <td className="small font-monospace text-break">
                {e.job_id
                  ? `job ${e.job_id}`
                  : e.speech_request_id
                    ? `speech ${e.speech_request_id}`
                    : e.stripe_id
                      ? `Stripe ${e.stripe_id}`
                      : 'top-up'}
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
  const [account, setAccount] = useState<Account | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = useCallback(() => {
    api<Account>('/v2/account').then(setAccount, setError);
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
              {account === null ? '…' : euros(account.balance_in_euro)}
            </output>
            {account !== null && account.owed_in_euro > 0 && (
              <p className="text-danger mb-0" role="status">
                {`Owed: ${euros(account.owed_in_euro)} (a refund or dispute took back credits already spent). Add credits to pay it; until then paid requests are refused.`}
              </p>
            )}
            <ErrorAlert error={error} />
            {account &&
              (account.credits_checkout ? (
                <>
                  <AddCredits account={account} onAccount={setAccount} />
                  <AutoTopUp account={account} onSaved={setAccount} />
                </>
              ) : (
                <CreditsNotConfigured />
              ))}
            {account && <LowBalanceAlert account={account} onSaved={setAccount} />}
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
