// Usage: where the money went over a range of UTC days (the last 7, 30 or 90, or dates of one's own),
// from GET /v2/usage: the requests and their outcomes, "Cost by day" stacked by the chosen grouping
// (model by default), "Usage by key", and "Download CSV" of the same range and grouping. The range and
// the grouping live in the URL's hash (./view.ts).
import { useEffect, useState, type ReactNode } from 'react';
import Button from 'react-bootstrap/Button';
import Col from 'react-bootstrap/Col';
import Form from 'react-bootstrap/Form';
import Row from 'react-bootstrap/Row';
import Spinner from 'react-bootstrap/Spinner';
import { api, apiRaw, type Usage } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { euros } from '../format';
import { Panel, useAction } from '../ui';
import { CostChart } from './CostChart';
import { KeyTable } from './KeyTable';
import { GROUPS, type Group } from './figures';
import { daysOf, PRESETS, usageQuery, useUsageView, type Preset, type UsageView } from './view';

const PRESET_LABELS: Record<Preset, string> = { '7d': 'Last 7 days', '30d': 'Last 30 days', '90d': 'Last 90 days' };
const DAY = new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeZone: 'UTC' });
const NUMBER = new Intl.NumberFormat('en-IE');

function Controls({ view, onChange, children }: { view: UsageView; onChange: (v: UsageView) => void; children: ReactNode }) {
  const days = daysOf(view);
  const setRange = (range: string) =>
    onChange(range === 'custom' ? { range, ...days, group: view.group } : { range: range as Preset, group: view.group });
  const setDay = (which: 'from' | 'to', date: string) => {
    if (date) onChange({ range: 'custom', ...days, [which]: date, group: view.group });
  };
  return (
    <Row className="g-2 align-items-end filters mb-3">
      <Form.Group as={Col} xs="auto" controlId="usage-range">
        <Form.Label className="small mb-0">Range</Form.Label>
        <Form.Select size="sm" value={view.range} onChange={(e) => setRange(e.target.value)}>
          {(Object.keys(PRESETS) as Preset[]).map((p) => (
            <option key={p} value={p}>
              {PRESET_LABELS[p]}
            </option>
          ))}
          <option value="custom">Custom dates</option>
        </Form.Select>
      </Form.Group>
      {view.range === 'custom' && (
        <>
          <Form.Group as={Col} xs="auto" controlId="usage-from">
            <Form.Label className="small mb-0">From</Form.Label>
            <Form.Control size="sm" type="date" value={view.from} onChange={(e) => setDay('from', e.target.value)} />
          </Form.Group>
          <Form.Group as={Col} xs="auto" controlId="usage-to">
            <Form.Label className="small mb-0">To</Form.Label>
            <Form.Control size="sm" type="date" value={view.to} onChange={(e) => setDay('to', e.target.value)} />
          </Form.Group>
        </>
      )}
      <Form.Group as={Col} xs="auto" controlId="usage-group">
        <Form.Label className="small mb-0">Group by</Form.Label>
        <Form.Select size="sm" value={view.group} onChange={(e) => onChange({ ...view, group: e.target.value as Group })}>
          {(Object.keys(GROUPS) as Group[]).map((g) => (
            <option key={g} value={g}>
              {GROUPS[g]}
            </option>
          ))}
        </Form.Select>
      </Form.Group>
      <Col xs="auto">{children}</Col>
    </Row>
  );
}

/** Saves the API's CSV of `query` as a file: fetched with the key, handed to the browser as a Blob's link. */
async function downloadCsv(query: URLSearchParams) {
  const res = await apiRaw(`/v2/usage?${query}&format=csv`);
  const blob = await res.blob();
  const name = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') ?? '')?.[1] ?? 'usage.csv';
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function Totals({ total }: { total: Usage['total'] }) {
  const figures = [
    ['requests', 'Requests', NUMBER.format(total.requests)],
    ['succeeded', 'Succeeded', NUMBER.format(total.succeeded)],
    ['failed', 'Failed', NUMBER.format(total.failed)],
    ['pending', 'Pending', NUMBER.format(total.pending)],
    ['cost', 'Cost', euros(total.cost_in_euro)],
  ] as const;
  return (
    <div className="d-flex flex-wrap gap-4 mb-3">
      {figures.map(([id, label, value]) => (
        <div key={id}>
          <label htmlFor={`usage-total-${id}`} className="d-block small text-body-secondary">
            {label}
          </label>
          <output id={`usage-total-${id}`} className="fs-5">
            {value}
          </output>
        </div>
      ))}
    </div>
  );
}

const loading = (what: string) => (
  <Spinner animation="border" role="status">
    <span className="visually-hidden">Loading {what}</span>
  </Spinner>
);

export function UsageScreen() {
  const [view, setView] = useUsageView();
  const [byGroup, setByGroup] = useState<Usage | null>(null);
  const [byKey, setByKey] = useState<Usage | null>(null);
  const [error, setError] = useState<unknown>(null);
  const csv = useAction();
  const viewKey = JSON.stringify(view);

  useEffect(() => {
    let current = true;
    setByGroup(null);
    setByKey(null);
    setError(null);
    const now = Date.now();
    const load = (group: Group) => api<Usage>(`/v2/usage?${usageQuery(view, group, now)}`);
    Promise.all([load(view.group), view.group === 'api_key' ? null : load('api_key')]).then(
      ([g, k]) => {
        if (!current) return;
        setByGroup(g);
        setByKey(k ?? g);
      },
      (err: unknown) => current && setError(err),
    );
    return () => {
      current = false;
    };
  }, [viewKey]); // the view's value: a new hash gives a new object of the same value

  const days = daysOf(view);
  const empty = byGroup !== null && byGroup.total.requests === 0;
  return (
    <>
      <Controls view={view} onChange={setView}>
        <Button
          size="sm"
          variant="outline-primary"
          disabled={!byGroup || csv.busy}
          onClick={() =>
            byGroup &&
            void csv.run(() =>
              downloadCsv(
                new URLSearchParams({ start: String(byGroup.start), end: String(byGroup.end), bucket: 'day', group_by: view.group }),
              ),
            )
          }
        >
          Download CSV
        </Button>
      </Controls>
      <p className="small text-body-secondary">
        {DAY.format(new Date(`${days.from}T00:00:00Z`))} to {DAY.format(new Date(`${days.to}T00:00:00Z`))}, UTC days.
      </p>
      <ErrorAlert error={error ?? csv.error} />
      <Panel id="cost-by-day" title="Cost by day" className="mb-4">
        {byGroup ? (
          <>
            <Totals total={byGroup.total} />
            {empty ? (
              <p className="text-body-secondary mb-0">No requests in this range.</p>
            ) : (
              <>
                <p className="small text-body-secondary mb-2">
                  Per {GROUPS[view.group].toLowerCase()}; a request counts on the day it was made.
                </p>
                <CostChart usage={byGroup} group={view.group} />
              </>
            )}
          </>
        ) : (
          !error && loading('usage')
        )}
      </Panel>
      <Panel id="usage-by-key" title="Usage by key">
        {byKey ? (
          byKey.total.requests === 0 ? (
            <p className="text-body-secondary mb-0">No requests in this range.</p>
          ) : (
            <KeyTable usage={byKey} labelledBy="usage-by-key-heading" />
          )
        ) : (
          !error && loading('usage by key')
        )}
      </Panel>
    </>
  );
}
