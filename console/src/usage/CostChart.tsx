// "Cost by day": a bar per UTC day of the range (empty days included), stacked by group (a model, a
// kind, a backend or an API key), the height what the day's finished requests cost. Drawn as SVG by
// recharts, without animation; the exact figures are in the tooltip and in the CSV.
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import type { Usage } from '../api';
import { euros } from '../format';
import { costByDay, type Group } from './figures';

// Bootstrap's colours, in an order where neighbours differ.
const PALETTE = ['#0d6efd', '#fd7e14', '#198754', '#d63384', '#6f42c1', '#20c997', '#ffc107', '#dc3545', '#0dcaf0', '#6c757d'];

const DAY_LABEL = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'short', timeZone: 'UTC' });

/** One datum per day: its label and, under `s<i>`, the cost of group i (recharts reads dotted keys as paths: no model ids). */
function chartData(usage: Usage, group: Group) {
  const { names, days } = costByDay(usage, group);
  const series = names.map((name, i) => ({ name, dataKey: `s${i}`, color: PALETTE[i % PALETTE.length]! }));
  const data = days.map(({ start, cost }) => ({
    day: DAY_LABEL.format(new Date(start * 1000)),
    ...Object.fromEntries(cost.map((c, i) => [`s${i}`, c])),
  }));
  return { series, data };
}

export function CostChart({ usage, group }: { usage: Usage; group: Group }) {
  const { series, data } = chartData(usage, group);
  return (
    <div className="cost-chart">
      <ResponsiveContainer width="100%" height={320}>
        <BarChart data={data} margin={{ top: 8, right: 8, bottom: 0, left: 8 }}>
          <CartesianGrid vertical={false} strokeDasharray="3 3" />
          <XAxis dataKey="day" tickLine={false} minTickGap={12} />
          <YAxis tickFormatter={(v: number) => euros(v)} width={72} />
          <Tooltip formatter={(v) => euros(Number(v))} />
          <Legend />
          {series.map((s) => (
            <Bar key={s.dataKey} dataKey={s.dataKey} name={s.name} stackId="cost" fill={s.color} isAnimationActive={false} />
          ))}
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}
