// The Usage screen's figures (console/src/usage/figures.ts) from day rows spanning several days, which
// the browser test cannot make (every request it makes is today's): each key's sums over the days,
// exact to the micro-euro where adding the euros as floats is not; the chart's days, empty ones included,
// and its groups.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { costByDay, totalsByKey, type Counters, type UsageRow } from '../../console/src/usage/figures.js';
import type { Usage } from '../../console/src/api-types.js';

const DAY_S = 86_400;
const START = 1_795_564_800; // a UTC midnight
const zero: Counters = {
  requests: 0,
  succeeded: 0,
  failed: 0,
  pending: 0,
  charged_in_euro: 0,
  refunded_in_euro: 0,
  cost_in_euro: 0,
  videos: 0,
  video_seconds: 0,
  characters: 0,
};
const row = (day: number, fields: Partial<UsageRow>): UsageRow => ({
  start: START + day * DAY_S,
  end: START + (day + 1) * DAY_S,
  ...zero,
  ...fields,
});
const usage = (days: number, data: UsageRow[]): Usage => ({
  object: 'usage',
  start: START,
  end: START + days * DAY_S,
  bucket: 'day',
  data,
  total: zero,
});

test("each key's rows summed over the days, money exact to the micro-euro, the costliest key first", () => {
  const k1 = '11111111-1111-4111-8111-111111111111';
  const k2 = '22222222-2222-4222-8222-222222222222';
  const totals = totalsByKey(
    usage(3, [
      row(0, {
        api_key_id: k1,
        requests: 2,
        succeeded: 1,
        failed: 1,
        charged_in_euro: 0.1,
        refunded_in_euro: 0.05,
        cost_in_euro: 0.05,
        videos: 1,
        video_seconds: 4,
      }),
      row(0, { api_key_id: k2, requests: 1, succeeded: 1, charged_in_euro: 0.00345, cost_in_euro: 0.00345, characters: 23 }),
      row(1, { api_key_id: k1, requests: 1, pending: 1, charged_in_euro: 0.2 }),
      row(2, {
        api_key_id: k1,
        requests: 3,
        succeeded: 3,
        charged_in_euro: 0.7,
        refunded_in_euro: 0.1,
        cost_in_euro: 0.6,
        videos: 5,
        video_seconds: 24,
      }),
      row(2, { api_key_id: k2, requests: 1, succeeded: 1, charged_in_euro: 0.000151, cost_in_euro: 0.000151, characters: 1 }),
    ]),
  );
  assert.notEqual(0.05 + 0.1, 0.15, 'floats would not do');
  assert.deepEqual(totals, [
    {
      key: k1,
      counters: {
        ...zero,
        requests: 6,
        succeeded: 4,
        failed: 1,
        pending: 1,
        charged_in_euro: 1,
        refunded_in_euro: 0.15,
        cost_in_euro: 0.65,
        videos: 6,
        video_seconds: 28,
      },
    },
    { key: k2, counters: { ...zero, requests: 2, succeeded: 2, charged_in_euro: 0.003601, cost_in_euro: 0.003601, characters: 24 } },
  ]);
});

test("the chart: every day of the range, empty ones at zero; a group's cost per day; groups by name", () => {
  const chart = costByDay(
    usage(4, [
      row(0, { model: 'sim-video-1', cost_in_euro: 0.4 }),
      row(0, { model: 'sim-speech-1', cost_in_euro: 0.00345 }),
      row(2, { model: null, cost_in_euro: 0 }),
      row(2, { model: 'sim-video-1', cost_in_euro: 0.2 }),
    ]),
    'model',
  );
  assert.deepEqual(chart.names, ['sim-speech-1', 'sim-video-1', 'voice clones']);
  assert.deepEqual(chart.days, [
    { start: START, cost: [0.00345, 0.4, 0] },
    { start: START + DAY_S, cost: [0, 0, 0] },
    { start: START + 2 * DAY_S, cost: [0, 0.2, 0] },
    { start: START + 3 * DAY_S, cost: [0, 0, 0] },
  ]);
  const byKey = costByDay(
    usage(1, [
      row(0, { api_key_id: null, cost_in_euro: 0.1 }),
      row(0, { api_key_id: 'abcdef12-0000-4000-8000-000000000000', cost_in_euro: 0.2 }),
    ]),
    'api_key',
  );
  assert.deepEqual(byKey, { names: ['key abcdef12', 'no key'], days: [{ start: START, cost: [0.2, 0.1] }] });
});
