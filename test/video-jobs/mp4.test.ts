import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { inspectMp4 } from '../helpers/mp4.js';

const assetDir = fileURLToPath(new URL('../../assets/sim-video/', import.meta.url));

const DIMENSIONS = {
  '16x9': { width: 256, height: 144 },
  '9x16': { width: 144, height: 256 },
} as const;
const ASPECTS = ['16x9', '9x16'] as const;
const SECONDS = [4, 6, 8] as const;
const KNOWN_BRANDS = new Set(['isom', 'mp41', 'mp42', 'iso2', 'iso4', 'iso5', 'iso6', 'avc1', 'M4V ']);

function loadAsset(name: string): Buffer {
  return readFileSync(`${assetDir}${name}`);
}

for (const aspect of ASPECTS) {
  for (const seconds of SECONDS) {
    const name = `${aspect}-${seconds}s.mp4`;
    test(`sim asset ${name} is a well-formed MP4`, () => {
      const info = inspectMp4(loadAsset(name));
      assert.ok(KNOWN_BRANDS.has(info.brand), `unexpected brand '${info.brand}'`);
      assert.equal(info.has_moov, true);
      assert.equal(info.has_mdat, true);
      assert.ok(Math.abs(info.duration_seconds - seconds) <= 0.05, `duration ${info.duration_seconds} not within 0.05s of ${seconds}`);
      assert.equal(info.width, DIMENSIONS[aspect].width);
      assert.equal(info.height, DIMENSIONS[aspect].height);
    });
  }
}

test('garbage input throws', () => {
  assert.throws(() => inspectMp4(Buffer.from('this is definitely not an mp4 file, just text')), {
    name: 'Mp4ParseError',
    message: /not an MP4/,
  });
  assert.throws(() => inspectMp4(Buffer.alloc(0)), /empty input/);
  assert.throws(() => inspectMp4(Buffer.alloc(4096, 0xff)), Error);
  assert.throws(() => inspectMp4(Buffer.alloc(4096, 0)), Error);
});

test('truncated asset (first 100 bytes) throws', () => {
  const truncated = loadAsset('16x9-4s.mp4').subarray(0, 100);
  assert.throws(() => inspectMp4(truncated), { name: 'Mp4ParseError', message: /truncated/ });
});

test('box with a size smaller than its header throws instead of looping', () => {
  const ftyp = Buffer.alloc(16);
  ftyp.writeUInt32BE(16, 0);
  ftyp.write('ftypisom', 4, 'latin1');
  const bad = Buffer.alloc(8);
  bad.writeUInt32BE(4, 0); // invalid: smaller than the 8-byte header
  bad.write('free', 4, 'latin1');
  assert.throws(() => inspectMp4(Buffer.concat([ftyp, bad])), /invalid size 4/);
});

function box(type: string, ...payload: Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  const header = Buffer.alloc(8);
  header.writeUInt32BE(8 + body.length, 0);
  header.write(type, 4, 'latin1');
  return Buffer.concat([header, body]);
}

test('synthetic file with version-1 mvhd/tkhd and a 64-bit mdat size', () => {
  const ftyp = box('ftyp', Buffer.from('mp42\0\0\0\0isommp42', 'latin1'));
  const mvhd = Buffer.alloc(4 + 8 + 8 + 4 + 8 + 80);
  mvhd.writeUInt8(1, 0);
  mvhd.writeUInt32BE(90_000, 20); // timescale
  mvhd.writeBigUInt64BE(90_000n * 5n + 45_000n, 24); // 5.5 s
  const tkhd = Buffer.alloc(4 + 32 + 52 + 8);
  tkhd.writeUInt8(1, 0);
  tkhd.writeUInt32BE(1920 * 65536, 88);
  tkhd.writeUInt32BE(1080 * 65536, 92);
  const hdlr = Buffer.alloc(24);
  hdlr.write('vide', 8, 'latin1');
  const moov = box('moov', box('mvhd', mvhd), box('trak', box('tkhd', tkhd), box('mdia', box('hdlr', hdlr))));
  const mdat = Buffer.alloc(16 + 10);
  mdat.writeUInt32BE(1, 0);
  mdat.write('mdat', 4, 'latin1');
  mdat.writeBigUInt64BE(26n, 8);

  const info = inspectMp4(Buffer.concat([ftyp, moov, mdat]));
  assert.deepEqual(info, {
    brand: 'mp42',
    duration_seconds: 5.5,
    width: 1920,
    height: 1080,
    has_moov: true,
    has_mdat: true,
  });
});
