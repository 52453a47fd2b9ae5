// What the Usage screen shows, kept in the page's URL (`#/usage?range=30d&group_by=model`, or
// `#/usage?from=2026-11-01&to=2026-11-28&group_by=kind` for dates of one's own) so that a view can be
// shared and a reload keeps it; and the API queries it stands for. Days are UTC days, as the API's buckets.
import { useCallback, useEffect, useState } from 'react';
import { GROUPS, type Group } from './figures';

export const PRESETS = { '7d': 7, '30d': 30, '90d': 90 } as const;
export type Preset = keyof typeof PRESETS;

export type UsageView = { range: Preset; group: Group } | { range: 'custom'; from: string; to: string; group: Group };

const DAY_S = 86_400;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** A YYYY-MM-DD date's UTC midnight, Unix seconds; null when it is no date. */
function dayStart(date: string): number | null {
  if (!DATE.test(date)) return null;
  const ms = Date.parse(`${date}T00:00:00Z`);
  return Number.isFinite(ms) && new Date(ms).toISOString().startsWith(date) ? ms / 1000 : null;
}

export const isoDay = (unix_s: number) => new Date(unix_s * 1000).toISOString().slice(0, 10);

export function viewOf(params: URLSearchParams): UsageView {
  const g = params.get('group_by') ?? '';
  const group: Group = g in GROUPS ? (g as Group) : 'model';
  const from = params.get('from') ?? '';
  const to = params.get('to') ?? '';
  if (dayStart(from) !== null && dayStart(to) !== null) return { range: 'custom', from, to, group };
  const r = params.get('range') ?? '';
  return { range: r in PRESETS ? (r as Preset) : '30d', group };
}

export function paramsOf(view: UsageView): URLSearchParams {
  return new URLSearchParams(
    view.range === 'custom' ? { from: view.from, to: view.to, group_by: view.group } : { range: view.range, group_by: view.group },
  );
}

/** The view's first and last day, as YYYY-MM-DD (a preset's last day is today, UTC). */
export function daysOf(view: UsageView, now_ms = Date.now()): { from: string; to: string } {
  if (view.range === 'custom') return { from: view.from, to: view.to };
  const today = Math.floor(now_ms / 1000 / DAY_S) * DAY_S;
  return { from: isoDay(today - (PRESETS[view.range] - 1) * DAY_S), to: isoDay(today) };
}

/** The API's `start` and `end` (excluded) for the view: its first day's midnight, the midnight after its last. */
export function rangeOf(view: UsageView, now_ms = Date.now()): { start: number; end: number } {
  const { from, to } = daysOf(view, now_ms);
  return { start: dayStart(from)!, end: dayStart(to)! + DAY_S };
}

/** The query of GET /v2/usage for the view, by day, grouped by `group_by`. */
export function usageQuery(view: UsageView, group_by: Group, now_ms = Date.now()): URLSearchParams {
  const { start, end } = rangeOf(view, now_ms);
  return new URLSearchParams({ start: String(start), end: String(end), bucket: 'day', group_by });
}

const hashParams = () => new URLSearchParams(location.hash.split('?')[1] ?? '');

const hashOf = (view: UsageView) => `#/usage?${paramsOf(view)}`;

/**
 * The view in the URL's hash, and a setter that writes a new one there (a history entry: Back returns).
 * A hash that names no view, or a partial one (`#/usage`, the nav's link), is replaced by the whole view it
 * stands for, so that the address shown is always one that can be shared.
 */
export function useUsageView(): [UsageView, (view: UsageView) => void] {
  const [view, setView] = useState(() => viewOf(hashParams()));
  useEffect(() => {
    const follow = () => {
      if (!/^#\/?usage(\?|$)/.test(location.hash)) return; // leaving the screen
      const next = viewOf(hashParams());
      if (location.hash !== hashOf(next)) history.replaceState(history.state, '', hashOf(next));
      setView(next);
    };
    follow();
    window.addEventListener('hashchange', follow);
    return () => window.removeEventListener('hashchange', follow);
  }, []);
  const change = useCallback((next: UsageView) => {
    location.hash = hashOf(next);
  }, []);
  return [view, change];
}
