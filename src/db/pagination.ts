// Keyset pagination of the lists (newest first): an item's public id is a prefix and its serial
// number, and `after` = the id of the last item of the previous page names where the next starts.
import { invalidParam } from '../errors.js';

export interface Page<T> {
  data: T[];
  has_more: boolean;
}

/** The serial number `after` names (null for the first page); a malformed cursor is a 400 naming `after`. */
export function cursorOf(prefix: string, query: { after?: string | undefined }): number | null {
  if (query.after === undefined) return null;
  const m = new RegExp(`^${prefix}(\\d{1,15})$`).exec(query.after);
  if (!m) throw invalidParam('after', `after must be the id of an item of this list (${prefix}<number>)`);
  return Number(m[1]);
}

/** Cuts rows fetched with LIMIT limit + 1 to a page. */
export function pageOf<T>(rows: T[], limit: number): Page<T> {
  return { data: rows.slice(0, limit), has_more: rows.length > limit };
}
