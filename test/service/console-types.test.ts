// The console's types of the API's answers (console/src/api-types.ts) are generated from the response
// schemas the API documents (scripts/console-api-types.ts): the file in the tree is what the script writes
// from today's schemas, so a changed answer shows up in `tsc -p console` wherever the console reads it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { CONSOLE_TYPES_FILE, consoleApiTypes } from '../../scripts/console-api-types.js';

test('console/src/api-types.ts is current: regenerate it with `npm run console-types`', async () => {
  assert.equal(fs.readFileSync(CONSOLE_TYPES_FILE, 'utf8'), await consoleApiTypes());
});
