// The search attributes this service writes (workflows/messages.ts) must exist in the namespace: on an
// external Temporal the operator registers them. A process that finds one missing stops at startup with
// one line saying which and how to add it, instead of failing every create later. They are listed with
// the operator service; where this process may not use it (Temporal Cloud, or an identity without that
// permission), each is looked up by a visibility query naming it, which Temporal refuses as an invalid
// argument when the namespace has no such attribute.
import { ConfigError } from '../config-error.js';
import { SEARCH_ATTRIBUTES } from '../../workflows/messages.js';
import type { TemporalConnectOptions } from './connection-config.js';
import { credentialRefusal, grpcCode, GRPC } from './startup-errors.js';

/** temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD */
const KEYWORD = 2;

interface TemporalServices {
  operatorService: { listSearchAttributes(req: { namespace: string }): Promise<{ customAttributes?: { [name: string]: number } | null }> };
  workflowService: { countWorkflowExecutions(req: { namespace: string; query: string }): Promise<unknown> };
}

/** The attributes missing, by visibility queries (one per attribute). */
async function missingByQuery(workflowService: TemporalServices['workflowService'], namespace: string): Promise<string[]> {
  const missing: string[] = [];
  for (const { name } of SEARCH_ATTRIBUTES) {
    try {
      await workflowService.countWorkflowExecutions({ namespace, query: `${name} = ''` });
    } catch (err) {
      if (grpcCode(err)?.code !== GRPC.INVALID_ARGUMENT) throw err;
      missing.push(name);
    }
  }
  return missing;
}

export async function checkSearchAttributes(
  temporal: TemporalServices,
  namespace: string,
  connect?: TemporalConnectOptions,
): Promise<void> {
  let missing: string[];
  try {
    const { customAttributes } = await temporal.operatorService.listSearchAttributes({ namespace });
    missing = SEARCH_ATTRIBUTES.map((sa) => sa.name).filter((name) => customAttributes?.[name] !== KEYWORD);
  } catch (err) {
    const code = grpcCode(err)?.code;
    if (code !== GRPC.PERMISSION_DENIED && code !== GRPC.UNIMPLEMENTED)
      throw (connect ? credentialRefusal(err, connect, namespace) : null) ?? err;
    try {
      missing = await missingByQuery(temporal.workflowService, namespace);
    } catch (queryErr) {
      throw (connect ? credentialRefusal(queryErr, connect, namespace) : null) ?? queryErr;
    }
  }
  if (missing.length === 0) return;
  const commands = missing
    .map((name) => `temporal operator search-attribute create --namespace ${namespace} --name ${name} --type Keyword`)
    .join(' && ');
  throw new ConfigError(
    `Temporal namespace "${namespace}" lacks the Keyword search attribute(s) ${missing.join(', ')}; add ` +
      `them: ${commands} (on Temporal Cloud: in the namespace's settings or with tcld)`,
  );
}
