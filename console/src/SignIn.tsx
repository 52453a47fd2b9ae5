// Sign in: the API key is checked against the API (GET /v2/balance) and, if accepted, kept in the
// tab's sessionStorage only.
import { useState, type FormEvent } from 'react';
import Alert from 'react-bootstrap/Alert';
import Button from 'react-bootstrap/Button';
import Card from 'react-bootstrap/Card';
import Container from 'react-bootstrap/Container';
import Form from 'react-bootstrap/Form';
import { api, ApiFailure } from './api';
import { ErrorAlert } from './ErrorAlert';

export function SignIn({ notice, onSignedIn }: { notice: string | null; onSignedIn: (key: string) => void }) {
  const [key, setKey] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api('/v2/balance', { key: key.trim() });
      onSignedIn(key.trim());
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <Container as="main" className="signin py-5">
      <h1 className="h3 mb-4">Video and voice API console</h1>
      <Card>
        <Card.Body>
          {notice && <Alert variant="warning">{notice}</Alert>}
          <Form onSubmit={submit}>
            <Form.Group className="mb-3" controlId="api-key">
              <Form.Label>API key</Form.Label>
              <Form.Control
                type="password"
                autoComplete="off"
                required
                value={key}
                onChange={(e) => setKey(e.target.value)}
                placeholder="vva_sk_..."
              />
              <Form.Text>Kept in this browser tab only (session storage) and sent to this server as a bearer token.</Form.Text>
            </Form.Group>
            {error instanceof ApiFailure && error.status === 401 ? (
              <Alert variant="danger">Wrong API key: the API did not accept it. Check the key and try again.</Alert>
            ) : (
              <ErrorAlert error={error} />
            )}
            <Button type="submit" disabled={busy || key.trim() === ''}>
              Sign in
            </Button>
          </Form>
        </Card.Body>
      </Card>
      <p className="mt-3 small text-body-secondary">
        No key yet? An operator makes one with <code>npm run admin -- key create --workspace &lt;id&gt;</code>. The API reference is at{' '}
        <a href="/docs">/docs</a>.
      </p>
    </Container>
  );
}
