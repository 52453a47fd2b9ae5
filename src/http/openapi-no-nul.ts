// JSON request bodies refuse a NUL character in any string or key (./json-body.ts: no text column can
// store one). This states it in their schemas: every free string gets the pattern below (beside any
// pattern it has), every object's keys too, and a value of any JSON type (zod's z.unknown()) refers to
// JsonValue, a JSON value with no NUL anywhere in it. Path and query parameters refuse every control
// character (refuseControl).
type JsonSchema = Record<string, unknown>;

/** A string without NUL. */
export const NO_NUL_PATTERN = '^[^\\x00]*$';
export const JSON_VALUE_COMPONENT = 'JsonValue';
const JSON_VALUE_REF = { $ref: `#/components/schemas/${JSON_VALUE_COMPONENT}` };

/** Any JSON value whose strings and keys hold no NUL (recursive). */
export const JSON_VALUE_SCHEMA: JsonSchema = {
  description: 'Any JSON value; no string or key in it may contain a NUL character.',
  pattern: NO_NUL_PATTERN,
  propertyNames: { pattern: NO_NUL_PATTERN },
  items: JSON_VALUE_REF,
  additionalProperties: JSON_VALUE_REF,
};

const isObject = (v: unknown): v is JsonSchema => typeof v === 'object' && v !== null && !Array.isArray(v);
const isAnything = (v: unknown) => v === true || (isObject(v) && Object.keys(v).filter((k) => k !== 'description').length === 0);

/** `s` (a string schema) refusing what `pattern` refuses too, beside any pattern it has. */
function withPattern(s: JsonSchema, pattern: string): JsonSchema {
  if ('const' in s || 'enum' in s) return s;
  if (s['pattern'] === undefined) return { ...s, pattern };
  if (s['pattern'] === pattern) return s;
  const allOf = Array.isArray(s['allOf']) ? (s['allOf'] as JsonSchema[]) : [];
  return allOf.some((x) => x['pattern'] === pattern) ? s : { ...s, allOf: [...allOf, { pattern }] };
}
const noNulString = (s: JsonSchema) => withPattern(s, NO_NUL_PATTERN);

/** A string without control characters (Unicode Cc, NUL included): every path and query parameter (./openapi.ts refuses the rest). */
export const NO_CONTROL_PATTERN = '^[^\\x00-\\x1f\\x7f-\\x9f]*$';

/** The schema of a path or query parameter, its strings refusing control characters. */
export function refuseControl(schema: JsonSchema): JsonSchema {
  const out: JsonSchema = { ...schema };
  for (const k of ['oneOf', 'anyOf'])
    if (Array.isArray(out[k])) out[k] = (out[k] as unknown[]).map((s) => (isObject(s) ? refuseControl(s) : s));
  if (isObject(out['items'])) out['items'] = refuseControl(out['items']);
  return out['type'] === 'string' ? withPattern(out, NO_CONTROL_PATTERN) : out;
}

/** `schema` with NUL refused in every string and key it admits. */
export function refuseNul(schema: JsonSchema): JsonSchema {
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(schema)) {
    if ((k === 'additionalProperties' || k === 'items') && isAnything(v)) out[k] = JSON_VALUE_REF;
    else if (k === 'properties' && isObject(v))
      out[k] = Object.fromEntries(
        Object.entries(v).map(([name, s]) => [name, isAnything(s) ? JSON_VALUE_REF : refuseNul(s as JsonSchema)]),
      );
    else if ((k === 'oneOf' || k === 'anyOf' || k === 'allOf' || k === 'prefixItems') && Array.isArray(v))
      out[k] = v.map((s) => (isObject(s) ? refuseNul(s) : s));
    else if ((k === 'items' || k === 'additionalProperties' || k === 'propertyNames' || k === 'not') && isObject(v)) out[k] = refuseNul(v);
    else out[k] = v;
  }
  if (out['type'] === 'object' && out['propertyNames'] === undefined && out['additionalProperties'] !== false)
    out['propertyNames'] = { pattern: NO_NUL_PATTERN };
  return out['type'] === 'string' ? noNulString(out) : out;
}
