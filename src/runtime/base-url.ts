// The address customers and providers reach this service at.
import { type Config } from '../config.js';

/** Base of the URLs in webhook events: PUBLIC_BASE_URL, else the API's own address. */
export function apiBaseUrl(config: Config): string {
  return config.publicBaseUrl ?? `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
}
