// The Temporal server settings this service relies on, read from config/temporal-dynamic-config.yaml:
// the file the docker-compose stack's server loads, turned into --dynamic-config-value arguments for
// the dev server, so both run with the same settings.
import fs from 'node:fs';
import { parse } from 'yaml';
import { ConfigError } from '../config-error.js';
import { projectPath } from '../paths.js';

export const TEMPORAL_DYNAMIC_CONFIG_FILE = projectPath('config', 'temporal-dynamic-config.yaml');

/** Each setting and its value. Only values without constraints are used here: they hold for every namespace. */
export function temporalDynamicConfig(file: string = TEMPORAL_DYNAMIC_CONFIG_FILE): Map<string, unknown> {
  let doc: unknown;
  try {
    doc = parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`cannot read the Temporal settings in ${file}: ${(err as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new ConfigError(`${file}: expected a map of Temporal settings`);
  const settings = new Map<string, unknown>();
  for (const [key, entries] of Object.entries(doc)) {
    const only = Array.isArray(entries) && entries.length === 1 ? (entries[0] as { value?: unknown; constraints?: object }) : undefined;
    if (!only || only.value === undefined || (only.constraints && Object.keys(only.constraints).length > 0)) {
      throw new ConfigError(`${file}: ${key} must have exactly one value, without constraints`);
    }
    settings.set(key, only.value);
  }
  return settings;
}

/** The dev server's arguments for these settings. */
export function dynamicConfigArgs(settings: Map<string, unknown> = temporalDynamicConfig()): string[] {
  return [...settings].flatMap(([key, value]) => ['--dynamic-config-value', `${key}=${JSON.stringify(value)}`]);
}
