// The service's own schemas: health.
import { z } from 'zod';

export const Health = z.strictObject({ ok: z.boolean() });

export const RESPONSE_COMPONENTS = { Health } satisfies Record<string, z.ZodType>;
