// Text fields whose limits the OpenAPI document states exactly as the server enforces them.
// JSON Schema counts a string's length in Unicode code points, zod's .min/.max in UTF-16 code units,
// and "blank" is whatever String.prototype.trim removes: here the checks count code points, and the
// JSON Schema (attached with .meta, which z.toJSONSchema merges in) says the same thing, including
// "not blank" as a pattern over an explicit list of the characters trim removes (no \s, whose meaning
// differs between regular expression engines).
import { z } from 'zod';

/** The characters String.prototype.trim removes: ECMAScript WhiteSpace and LineTerminator. */
const TRIMMED = '\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff';
/** Unicode control characters (general category Cc). */
const CONTROL = '\x00-\x1f\x7f-\x9f';
/** Matches a string with at least one character trim keeps. */
export const NOT_BLANK = new RegExp(`[^${TRIMMED}]`);
const NO_CONTROL = new RegExp(`^[^${CONTROL}]*$`);
const NOT_BLANK_NO_CONTROL = new RegExp(`^[^${CONTROL}]*[^${CONTROL}${TRIMMED}][^${CONTROL}]*$`);

export const codePoints = (s: string): number => {
  let n = 0;
  for (const _ of s) n++;
  return n;
};

/**
 * A string of `chars_min` (default 0, or 1 when `notBlank`) to `chars_max` (default: no limit) code
 * points; `notBlank`: with a character trim keeps; `noControl`: without control characters.
 */
export function text(opts: { chars_max?: number; chars_min?: number; notBlank?: boolean; noControl?: boolean }) {
  const min = opts.chars_min ?? (opts.notBlank ? 1 : 0);
  const max = opts.chars_max;
  const pattern = opts.notBlank ? (opts.noControl ? NOT_BLANK_NO_CONTROL : NOT_BLANK) : opts.noControl ? NO_CONTROL : null;
  let schema = z.string();
  if (opts.notBlank) schema = schema.refine((s) => NOT_BLANK.test(s), 'must not be blank');
  if (opts.noControl) schema = schema.refine((s) => NO_CONTROL.test(s), 'must not contain control characters');
  if (min > 0) schema = schema.refine((s) => codePoints(s) >= min, `must be at least ${min} characters`);
  if (max !== undefined) schema = schema.refine((s) => codePoints(s) <= max, `must be at most ${max} characters`);
  return schema.meta({
    ...(min > 0 ? { minLength: min } : {}),
    ...(max !== undefined ? { maxLength: max } : {}),
    ...(pattern ? { pattern: pattern.source } : {}),
  });
}
