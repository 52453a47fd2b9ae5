// An error shown in words (never a blank screen), announced to screen readers as an alert.
import Alert from 'react-bootstrap/Alert';
import { describeError } from './api';

export function ErrorAlert({ error, onClose }: { error: unknown; onClose?: () => void }) {
  if (error === null || error === undefined) return null;
  return (
    <Alert variant="danger" dismissible={onClose !== undefined} onClose={onClose} className="text-break">
      {describeError(error)}
    </Alert>
  );
}
