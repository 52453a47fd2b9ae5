// "Usage by key": one line per API key over the whole range (the API's day rows of each key added up,
// ./figures.ts), and the range's total below.
import Table from 'react-bootstrap/Table';
import type { Usage } from '../api';
import { euros } from '../format';
import { COUNTERS, totalsByKey, type Counters } from './figures';

const HEADINGS: Record<keyof Counters, string> = {
  requests: 'Requests',
  succeeded: 'Succeeded',
  failed: 'Failed',
  pending: 'Pending',
  charged_in_euro: 'Charged',
  refunded_in_euro: 'Refunded',
  cost_in_euro: 'Cost',
  videos: 'Videos',
  video_seconds: 'Video seconds',
  characters: 'Characters',
};
const NUMBER = new Intl.NumberFormat('en-IE');

function Cells({ counters }: { counters: Counters }) {
  return COUNTERS.map((c) => (
    <td key={c} className="text-end text-nowrap" data-column={c}>
      {c.endsWith('_in_euro') ? euros(counters[c]) : NUMBER.format(counters[c])}
    </td>
  ));
}

export function KeyTable({ usage, labelledBy }: { usage: Usage; labelledBy: string }) {
  return (
    <Table responsive size="sm" striped className="align-middle mb-0" aria-labelledby={labelledBy}>
      <thead>
        <tr>
          <th scope="col">API key</th>
          {COUNTERS.map((c) => (
            <th key={c} scope="col" className="text-end">
              {HEADINGS[c]}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {totalsByKey(usage).map(({ key, counters }) => (
          <tr key={key ?? ''} data-api-key-id={key ?? ''}>
            <th scope="row" className="small font-monospace fw-normal text-break">
              {key ?? 'no key'}
            </th>
            <Cells counters={counters} />
          </tr>
        ))}
      </tbody>
      <tfoot>
        <tr className="fw-semibold">
          <th scope="row">Total</th>
          <Cells counters={usage.total} />
        </tr>
      </tfoot>
    </Table>
  );
}
