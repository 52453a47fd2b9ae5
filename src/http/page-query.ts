import type { Request } from 'express';
import { PageQuery } from './schemas.js';
import { fromZodError } from './errors.js';

/** `limit` and `after` of a paginated list, validated (a 400 naming the parameter). */
export function pageQueryOf(req: Request): PageQuery {
  const q = PageQuery.safeParse(req.query);
  if (!q.success) throw fromZodError(q.error);
  return q.data;
}
