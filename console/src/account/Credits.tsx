// Buying credits on the Account screen: "Add credits" (an amount, then Stripe Checkout; back from it paid,
// the balance is read again until the credit arrives) and automatic top-up (a threshold and an amount
// charged to the card a Checkout saved; when its payment failed, it is off and the screen says why).
// The forms leave the amounts to the API (no browser validation): an amount it refuses is shown with its
// own message, and so is a service where buying credits is not configured.
import { useEffect, useState, type FormEvent } from 'react';
import Alert from 'react-bootstrap/Alert';
import Button from 'react-bootstrap/Button';
import Col from 'react-bootstrap/Col';
import Form from 'react-bootstrap/Form';
import Row from 'react-bootstrap/Row';
import { api, type Account, type CheckoutSession } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { euros } from '../format';
import { EuroInput, useAction } from '../ui';

/** How long, back from a paid Checkout, the balance is read again (every 2 s) until the credit arrives. */
const CREDIT_WAIT_MS = 120_000;
const CHECKOUT_RETURN = 'checkout';
const BALANCE_BEFORE_CHECKOUT = 'vva.balanceBeforeCheckout';

/** Where Checkout sends the customer back: this page's Account screen, saying how it went. */
const returnUrl = (outcome: 'paid' | 'cancelled') => `${location.origin}${location.pathname}?${CHECKOUT_RETURN}=${outcome}#/account`;

/** An amount typed in euros, as the API takes it: empty is 0 (the API says what it accepts). */
const amountOf = (typed: string) => (typed.trim() === '' ? 0 : Number(typed));

/** Back from Checkout paid: the account read again until the credit arrives; what to say meanwhile. */
function useCheckoutReturn(account: Account, onAccount: (a: Account) => void): string | null {
  const [status, setStatus] = useState<string | null>(null);
  useEffect(() => {
    const outcome = new URLSearchParams(location.search).get(CHECKOUT_RETURN);
    if (!outcome) return;
    history.replaceState(null, '', `${location.pathname}${location.hash}`);
    if (outcome !== 'paid') {
      setStatus('Checkout was cancelled: nothing was charged.');
      return;
    }
    const before = Number(sessionStorage.getItem(BALANCE_BEFORE_CHECKOUT) ?? account.balance_in_euro);
    sessionStorage.removeItem(BALANCE_BEFORE_CHECKOUT);
    setStatus('Payment received by Stripe; waiting for the credit to arrive…');
    const started = Date.now();
    let stopped = false;
    const poll = () => {
      if (stopped) return;
      api<Account>('/v2/account').then(
        (a) => {
          onAccount(a);
          if (a.balance_in_euro > before) {
            setStatus(`Credited ${euros(Math.round((a.balance_in_euro - before) * 100) / 100)}.`);
            return;
          }
          if (Date.now() - started > CREDIT_WAIT_MS)
            setStatus('The credit has not arrived yet; it will show on the statement once Stripe confirms it.');
          else setTimeout(poll, 2_000);
        },
        () => setTimeout(poll, 2_000),
      );
    };
    poll();
    return () => {
      stopped = true;
    };
    // Once, on the return from Checkout.
  }, []);
  return status;
}

/** "Add credits": an amount, then the browser goes to the Checkout Session's page. */
export function AddCredits({ account, onAccount }: { account: Account; onAccount: (a: Account) => void }) {
  const bounds = account.credits_checkout!;
  const [amount, setAmount] = useState('');
  const status = useCheckoutReturn(account, onAccount);
  const { busy, error, run } = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      sessionStorage.setItem(BALANCE_BEFORE_CHECKOUT, String(account.balance_in_euro));
      const session = await api<CheckoutSession>('/v2/billing/checkout', {
        method: 'POST',
        json: { amount_in_euro: amountOf(amount), success_url: returnUrl('paid'), cancel_url: returnUrl('cancelled') },
      });
      if (!session.url) throw new Error('Stripe answered a Checkout Session without a page to pay on; try again');
      location.assign(session.url);
    });
  };
  return (
    <Form noValidate onSubmit={submit} className="mt-3" aria-labelledby="add-credits-heading">
      <h2 id="add-credits-heading" className="h6 mb-1">
        Add credits
      </h2>
      <Form.Group controlId="add-credits-amount">
        <Form.Label className="text-body-secondary mb-1">Amount</Form.Label>
        <EuroInput value={amount} onChange={setAmount} describedBy="add-credits-help">
          <Button type="submit" variant="primary" disabled={busy}>
            Add credits
          </Button>
        </EuroInput>
        <Form.Text id="add-credits-help">
          {`Paid with Stripe Checkout, from ${euros(bounds.min_in_euro)} to ${euros(bounds.max_in_euro)}; your card may be saved for automatic top-up.`}
        </Form.Text>
      </Form.Group>
      {status && (
        <output className="d-block mt-2" role="status">
          {status}
        </output>
      )}
      <ErrorAlert error={error} />
    </Form>
  );
}

/** Without Stripe on this service: said, instead of a control that could only fail. */
export function CreditsNotConfigured() {
  return (
    <p className="mt-3 mb-0 small text-body-secondary" role="note">
      Buying credits is not configured on this service (no Stripe key): ask its operator to add credits.
    </p>
  );
}

/**
 * Automatic top-up: when a charge leaves the balance below the threshold, the amount is charged to the card
 * a paid Checkout saved, once per crossing. Its payment failing turns it off: shown here, with the reason.
 */
export function AutoTopUp({ account, onSaved }: { account: Account; onSaved: (a: Account) => void }) {
  const current = account.auto_top_up;
  const [threshold, setThreshold] = useState(current ? String(current.threshold_in_euro) : '');
  const [amount, setAmount] = useState(current ? String(current.amount_in_euro) : '');
  const [saved, setSaved] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  useEffect(() => {
    setThreshold(current ? String(current.threshold_in_euro) : '');
    setAmount(current ? String(current.amount_in_euro) : '');
  }, [current?.threshold_in_euro, current?.amount_in_euro]);
  const save = (auto_top_up: { threshold_in_euro: number; amount_in_euro: number } | null) => {
    setSaved(null);
    void run(async () => {
      onSaved(await api<Account>('/v2/account', { method: 'PATCH', json: { auto_top_up } }));
      setSaved(auto_top_up ? 'Saved.' : 'Automatic top-up is off.');
    });
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save({ threshold_in_euro: amountOf(threshold), amount_in_euro: amountOf(amount) });
  };
  return (
    <Form noValidate onSubmit={submit} className="mt-3" aria-labelledby="auto-top-up-heading">
      <h2 id="auto-top-up-heading" className="h6 mb-1">
        Automatic top-up
      </h2>
      {account.auto_top_up_error !== null && (
        <Alert variant="warning" className="py-2 small text-break" role="status" aria-label="Automatic top-up failed">
          {`Automatic top-up is off: ${account.auto_top_up_error}. Nothing was credited for it; save it again to turn it back on.`}
        </Alert>
      )}
      <p className="small mb-2" aria-live="polite">
        {current
          ? `On: when a charge leaves the balance below ${euros(current.threshold_in_euro)}, ${euros(current.amount_in_euro)} is charged to your saved card.`
          : 'Off.'}
      </p>
      <Row className="g-2">
        <Form.Group as={Col} sm={6} controlId="auto-top-up-threshold">
          <Form.Label className="text-body-secondary mb-1">Top-up threshold</Form.Label>
          <EuroInput value={threshold} onChange={setThreshold} describedBy="auto-top-up-help" />
        </Form.Group>
        <Form.Group as={Col} sm={6} controlId="auto-top-up-amount">
          <Form.Label className="text-body-secondary mb-1">Top-up amount</Form.Label>
          <EuroInput value={amount} onChange={setAmount} describedBy="auto-top-up-help" />
        </Form.Group>
      </Row>
      <div className="d-flex flex-wrap gap-2 mt-2">
        <Button type="submit" variant="outline-primary" disabled={busy}>
          Save top-up
        </Button>
        {current && (
          <Button variant="outline-secondary" disabled={busy} onClick={() => save(null)}>
            Turn off top-up
          </Button>
        )}
      </div>
      <Form.Text id="auto-top-up-help">
        {saved ? `${saved} ` : ''}
        Charged to the card your last paid Checkout saved, once each time a charge takes the balance below the threshold.
      </Form.Text>
      <ErrorAlert error={error} />
    </Form>
  );
}
