// Small pieces the screens share: a titled panel, a field of euros, and an action's busy and error state.
import { useCallback, useState, type ReactNode } from 'react';
import Card from 'react-bootstrap/Card';
import Form from 'react-bootstrap/Form';
import InputGroup from 'react-bootstrap/InputGroup';

/** A card that is a labelled region, titled by its heading. */
export function Panel({ id, title, className, children }: { id: string; title: string; className?: string; children: ReactNode }) {
  return (
    <Card as="section" aria-labelledby={`${id}-heading`} className={className}>
      <Card.Body>
        <h2 id={`${id}-heading`} className="h5">
          {title}
        </h2>
        {children}
      </Card.Body>
    </Card>
  );
}

/** Runs an action (a form's submission, a button's request): busy meanwhile, its error kept to be shown. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = useCallback(async (action: () => Promise<void>) => {
    setError(null);
    setBusy(true);
    try {
      await action();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, setError, run };
}

/** An amount in euros typed by hand ("€" before it, `children` after it: its button); labelled by the Form.Group around it. */
export function EuroInput(props: {
  value: string;
  onChange: (value: string) => void;
  step?: string;
  min?: number;
  max?: number;
  placeholder?: string;
  describedBy?: string;
  children?: ReactNode;
}) {
  return (
    <InputGroup>
      <InputGroup.Text>€</InputGroup.Text>
      <Form.Control
        type="number"
        step={props.step ?? '0.01'}
        min={props.min}
        max={props.max}
        inputMode="decimal"
        placeholder={props.placeholder}
        value={props.value}
        onChange={(e) => props.onChange(e.target.value)}
        aria-describedby={props.describedBy}
      />
      {props.children}
    </InputGroup>
  );
}
