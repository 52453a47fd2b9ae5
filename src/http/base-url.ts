import type { Request } from 'express';

/** Absolute base of URLs we hand out: PUBLIC_BASE_URL, else the request's own scheme and host. */
export function baseUrlOf(req: Request, publicBaseUrl: string | undefined): string {
  return publicBaseUrl ?? `${req.protocol}://${req.get('host') ?? 'localhost'}`;
}
