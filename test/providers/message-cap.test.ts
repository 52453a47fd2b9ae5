// One cap on a provider's message (MESSAGE_CHARS_MAX of src/providers/http-body.ts), defined once and
// applied by every adapter: the error messages of the HTTP adapters are cut to it, and the simulator's
// `simulate.message` (the failure message it reports) is refused past it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { MESSAGE_CHARS_MAX } from '../../src/providers/http-body.js';
import { truncate } from '../../src/providers/video/http.js';
import { SimulateSchema } from '../../src/providers/video/simulator.js';

test('the message cap is defined once, in the shared HTTP plumbing of the providers, and every user of it imports that one', () => {
  const files = fs
    .readdirSync('src/providers', { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.posix.join('src/providers', f.split(path.sep).join('/')));
  const defining = files.filter((f) => /\bMESSAGE_CHARS_MAX\s*=/.test(fs.readFileSync(f, 'utf8')));
  assert.deepEqual(defining, ['src/providers/http-body.ts']);
  const using = files.filter((f) => f !== 'src/providers/http-body.ts' && fs.readFileSync(f, 'utf8').includes('MESSAGE_CHARS_MAX'));
  assert.deepEqual(using.sort(), ['src/providers/video/http.ts', 'src/providers/video/simulator.ts']);
  // The voice adapters cut what their provider said with the plumbing's clipMessage, which applies the cap
  // (Cartesia's HTTP and WebSocket adapters through the errors they share, cartesia-wire.ts).
  const clipping = files.filter((f) => f !== 'src/providers/http-body.ts' && /\bclipMessage\(/.test(fs.readFileSync(f, 'utf8')));
  assert.deepEqual(clipping.sort(), ['src/providers/voice/cartesia-wire.ts', 'src/providers/voice/elevenlabs.ts']);
});

test('a message is cut to the cap, an ellipsis its last character; the simulator refuses a longer one', () => {
  assert.equal(MESSAGE_CHARS_MAX, 500);
  const long = 'x'.repeat(MESSAGE_CHARS_MAX + 1);
  assert.equal(truncate(long).length, MESSAGE_CHARS_MAX);
  assert.ok(truncate(long).endsWith('…'));
  assert.equal(truncate(long.slice(1)), long.slice(1));
  assert.equal(SimulateSchema.safeParse({ outcome: 'fail', message: long.slice(1) }).success, true);
  assert.equal(SimulateSchema.safeParse({ outcome: 'fail', message: long }).success, false);
});
