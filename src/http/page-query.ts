import type { Request } from 'express';
import type { z } from 'zod';
import { fromZodError } from '../errors.js';

/** The query of a paginated list (`limit`, `after`, ...), validated with its schema (a 400 naming the parameter). */
export function pageQueryOf<Q extends z.ZodType>(req: Request, schema: Q): z.infer<Q> {
  const q = schema.safeParse(req.query);
  if (!q.success) throw fromZodError(q.error);
  return q.data;
}
