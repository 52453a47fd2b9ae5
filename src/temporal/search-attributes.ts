// The search attributes this service writes (workflows/messages.ts) must exist in the namespace: on an
// external Temporal the operator registers them. A process that finds one missing stops at startup with
// one line saying which and how to add it, instead of failing every create later.
import { ConfigError } from '../config.js';
import { SEARCH_ATTRIBUTES } from '../../workflows/messages.js';
import type { TemporalConnectOptions } from './connection-config.js';
import { credentialRefusal } from './startup-errors.js';

/** temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD */
const KEYWORD = 2;

interface OperatorService {
  listSearchAttributes(req: { namespace: string }): Promise<{ customAttributes?: { [name: string]: number } | null }>;
}

export async function checkSearchAttributes(operator: OperatorService, namespace: string, connect?: TemporalConnectOptions): Promise<void> {
  let customAttributes: { [name: string]: number } | null | undefined;
  try {
    ({ customAttributes } = await operator.listSearchAttributes({ namespace }));
  } catch (err) {
    const refused = connect ? credentialRefusal(err, connect, namespace) : null;
    throw refused ?? err;
  }
  const missing = SEARCH_ATTRIBUTES.map((sa) => sa.name).filter((name) => customAttributes?.[name] !== KEYWORD);
  if (missing.length === 0) return;
  const commands = missing.map((name) => `temporal operator search-attribute create --namespace ${namespace} --name ${name} --type Keyword`).join(' && ');
  throw new ConfigError(`Temporal namespace "${namespace}" lacks the Keyword search attribute(s) ${missing.join(', ')}; add them: ${commands}`);
}
