/**
 * Minimal, dependency-free MP4 (ISO BMFF, ISO/IEC 14496-12) inspector.
 *
 * Walks the top-level boxes of a fully-buffered file and extracts:
 *  - the major brand from `ftyp`
 *  - the presentation duration from `moov/mvhd` (versions 0 and 1)
 *  - the width/height from the `tkhd` of the first video track
 *    (`moov/trak` whose `mdia/hdlr` handler type is `vide`)
 *
 * Every box size is validated against its enclosing container, so truncated
 * or garbage input raises an `Mp4ParseError` instead of reading out of bounds
 * or looping. The number of boxes visited is bounded as well.
 */

export interface Mp4Info {
  /** Major brand from `ftyp`, e.g. "isom". */
  brand: string;
  /** `mvhd.duration / mvhd.timescale`; 0 when there is no moov or the duration is unknown. */
  duration_seconds: number;
  /** Width of the first video track (from `tkhd`, 16.16 fixed point); 0 if there is no video track. */
  width: number;
  /** Height of the first video track (from `tkhd`, 16.16 fixed point); 0 if there is no video track. */
  height: number;
  has_moov: boolean;
  has_mdat: boolean;
}

export class Mp4ParseError extends Error {
  constructor(message: string) {
    super(`inspectMp4: ${message}`);
    this.name = 'Mp4ParseError';
  }
}

interface Box {
  type: string;
  /** Offset of the box header. */
  start: number;
  /** Offset of the first payload byte. */
  payloadStart: number;
  /** Offset one past the last byte of the box. */
  end: number;
}

/** Upper bound on boxes visited per container, guards against pathological input. */
const BOXES_PER_CONTAINER_MAX = 10_000;

/** Box types that may legitimately open an ISO BMFF file. */
const KNOWN_LEADING_TYPES: ReadonlySet<string> = new Set(['ftyp', 'styp', 'free', 'skip', 'wide', 'pdin', 'moov', 'mdat', 'uuid']);

function isPrintableFourCC(buf: Buffer, offset: number): boolean {
  for (let i = 0; i < 4; i++) {
    const c = buf[offset + i];
    if (c === undefined || c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

/**
 * Parse the box header at `offset`; the box must end at or before `limit`.
 * `context` names the enclosing container for error messages.
 */
function readBoxHeader(buf: Buffer, offset: number, limit: number, context: string): Box {
  if (limit - offset < 8) {
    throw new Mp4ParseError(`truncated box header in ${context} at offset ${offset} (need 8 bytes, have ${limit - offset})`);
  }
  const size32 = buf.readUInt32BE(offset);
  if (!isPrintableFourCC(buf, offset + 4)) {
    throw new Mp4ParseError(
      `invalid box type bytes 0x${buf.subarray(offset + 4, offset + 8).toString('hex')} in ${context} at offset ${offset}`,
    );
  }
  const type = buf.toString('latin1', offset + 4, offset + 8);

  let headerSize = 8;
  let size: number;
  if (size32 === 1) {
    // 64-bit "largesize" follows the type.
    if (limit - offset < 16) {
      throw new Mp4ParseError(`truncated 64-bit size for '${type}' box in ${context} at offset ${offset}`);
    }
    const big = buf.readBigUInt64BE(offset + 8);
    if (big > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new Mp4ParseError(`'${type}' box in ${context} at offset ${offset} has an unsupported size ${big}`);
    }
    size = Number(big);
    headerSize = 16;
  } else if (size32 === 0) {
    // Box extends to the end of its container (normally only the last top-level box).
    size = limit - offset;
  } else {
    size = size32;
  }

  if (size < headerSize) {
    throw new Mp4ParseError(
      `'${type}' box in ${context} at offset ${offset} has invalid size ${size} (smaller than its ${headerSize}-byte header)`,
    );
  }
  if (offset + size > limit) {
    throw new Mp4ParseError(
      `truncated input: '${type}' box in ${context} at offset ${offset} declares ${size} bytes but only ${limit - offset} remain`,
    );
  }
  if (type === 'uuid') headerSize += 16;
  if (headerSize > size) {
    throw new Mp4ParseError(`'uuid' box in ${context} at offset ${offset} is too small for its extended type`);
  }
  return { type, start: offset, payloadStart: offset + headerSize, end: offset + size };
}

/** List the child boxes laid out in [start, end). */
function readChildren(buf: Buffer, start: number, end: number, context: string): Box[] {
  const boxes: Box[] = [];
  let offset = start;
  while (offset < end) {
    if (boxes.length >= BOXES_PER_CONTAINER_MAX) {
      throw new Mp4ParseError(`too many boxes in ${context} (> ${BOXES_PER_CONTAINER_MAX})`);
    }
    const box = readBoxHeader(buf, offset, end, context);
    boxes.push(box);
    offset = box.end; // always advances by >= 8 bytes
  }
  return boxes;
}

function requirePayload(box: Box, needed: number, path: string): void {
  if (box.end - box.payloadStart < needed) {
    throw new Mp4ParseError(`'${path}' box too short: need ${needed} payload bytes, have ${box.end - box.payloadStart}`);
  }
}

function parseMvhd(buf: Buffer, box: Box): number {
  requirePayload(box, 4, 'moov/mvhd');
  const p = box.payloadStart;
  const version = buf.readUInt8(p);
  let timescale: number;
  let duration: number;
  let unknown: boolean;
  if (version === 1) {
    // version/flags(4) creation(8) modification(8) timescale(4) duration(8)
    requirePayload(box, 32, 'moov/mvhd');
    timescale = buf.readUInt32BE(p + 20);
    const raw = buf.readBigUInt64BE(p + 24);
    unknown = raw === 0xffff_ffff_ffff_ffffn;
    duration = Number(raw);
  } else if (version === 0) {
    // version/flags(4) creation(4) modification(4) timescale(4) duration(4)
    requirePayload(box, 20, 'moov/mvhd');
    timescale = buf.readUInt32BE(p + 12);
    const raw = buf.readUInt32BE(p + 16);
    unknown = raw === 0xffff_ffff;
    duration = raw;
  } else {
    throw new Mp4ParseError(`unsupported mvhd version ${version}`);
  }
  if (timescale === 0) throw new Mp4ParseError('mvhd timescale is 0');
  return unknown ? 0 : duration / timescale;
}

function parseTkhdDimensions(buf: Buffer, box: Box): { width: number; height: number } {
  requirePayload(box, 4, 'trak/tkhd');
  const p = box.payloadStart;
  const version = buf.readUInt8(p);
  // After the version-dependent times/ids: reserved(8) layer(2) alternate_group(2)
  // volume(2) reserved(2) matrix(36) => 52 bytes, then width(4) height(4).
  let fixedStart: number;
  if (version === 1) {
    fixedStart = 4 + 8 + 8 + 4 + 4 + 8; // flags, creation, modification, track_ID, reserved, duration
  } else if (version === 0) {
    fixedStart = 4 + 4 + 4 + 4 + 4 + 4;
  } else {
    throw new Mp4ParseError(`unsupported tkhd version ${version}`);
  }
  const widthOffset = fixedStart + 52;
  requirePayload(box, widthOffset + 8, 'trak/tkhd');
  return {
    width: buf.readUInt32BE(p + widthOffset) / 65536,
    height: buf.readUInt32BE(p + widthOffset + 4) / 65536,
  };
}

/** Handler type of a trak (`mdia/hdlr`), or undefined if absent. */
function trakHandlerType(buf: Buffer, trak: Box): string | undefined {
  const mdia = readChildren(buf, trak.payloadStart, trak.end, 'moov/trak').find((b) => b.type === 'mdia');
  if (!mdia) return undefined;
  const hdlr = readChildren(buf, mdia.payloadStart, mdia.end, 'moov/trak/mdia').find((b) => b.type === 'hdlr');
  if (!hdlr) return undefined;
  // version/flags(4) pre_defined(4) handler_type(4)
  requirePayload(hdlr, 12, 'moov/trak/mdia/hdlr');
  return buf.toString('latin1', hdlr.payloadStart + 8, hdlr.payloadStart + 12);
}

/**
 * Inspect an in-memory MP4 file.
 * @throws {Mp4ParseError} on empty, truncated, malformed or non-MP4 input.
 */
export function inspectMp4(buf: Buffer): Mp4Info {
  if (buf.length === 0) throw new Mp4ParseError('empty input');
  if (buf.length < 8) throw new Mp4ParseError(`input too short to be an MP4 (${buf.length} bytes)`);

  const firstType = isPrintableFourCC(buf, 4) ? buf.toString('latin1', 4, 8) : undefined;
  if (firstType === undefined || !KNOWN_LEADING_TYPES.has(firstType)) {
    throw new Mp4ParseError(
      `not an MP4 (ISO BMFF) file: first box type is ${
        firstType === undefined ? `0x${buf.subarray(4, 8).toString('hex')}` : `'${firstType}'`
      }`,
    );
  }

  const top = readChildren(buf, 0, buf.length, 'file');

  const ftyp = top.find((b) => b.type === 'ftyp');
  if (!ftyp) throw new Mp4ParseError('not an MP4 (ISO BMFF) file: no ftyp box');
  requirePayload(ftyp, 4, 'ftyp');
  const brand = buf.toString('latin1', ftyp.payloadStart, ftyp.payloadStart + 4);

  const moov = top.find((b) => b.type === 'moov');
  const has_mdat = top.some((b) => b.type === 'mdat');

  let duration_seconds = 0;
  let width = 0;
  let height = 0;

  if (moov) {
    const moovChildren = readChildren(buf, moov.payloadStart, moov.end, 'moov');
    const mvhd = moovChildren.find((b) => b.type === 'mvhd');
    if (!mvhd) throw new Mp4ParseError('moov box has no mvhd');
    duration_seconds = parseMvhd(buf, mvhd);

    for (const trak of moovChildren) {
      if (trak.type !== 'trak') continue;
      if (trakHandlerType(buf, trak) !== 'vide') continue;
      const tkhd = readChildren(buf, trak.payloadStart, trak.end, 'moov/trak').find((b) => b.type === 'tkhd');
      if (!tkhd) throw new Mp4ParseError('video trak has no tkhd');
      ({ width, height } = parseTkhdDimensions(buf, tkhd));
      break;
    }
  }

  return { brand, duration_seconds, width, height, has_moov: moov !== undefined, has_mdat };
}
