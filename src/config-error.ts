// A configuration or startup problem the operator must fix: the process ends with its message, one
// line per problem, never a stack trace (src/process-lifecycle.ts). Its own module so that anything the
// config loads (the model catalog) can throw it without importing config.ts.
export class ConfigError extends Error {
  override name = 'ConfigError';
}
