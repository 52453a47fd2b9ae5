// multipart/form-data uploads (multer over busboy), held in memory only: nothing is ever written to
// a temp dir, so nothing outlives the request. Every dimension is limited, and every way a body can
// be wrong ends in a 4xx ApiError naming the part when it is known, never a 500:
//
//   declared Content-Length above the request limit  413 request_too_large (nothing is read)
//   more bytes received than the request limit        413 request_too_large (a body without a length)
//   a file above fileBytesMax                        413 file_too_large        (param: its part)
//   files together above totalFileBytesMax           413 upload_too_large      (param: its part)
//   a file whose content is not of the accepted type 415 unsupported_file_type (param: its part)
//   too many files / fields / parts, a text value too long, an unknown or nested part name   400
//   truncated body, malformed part header, missing boundary, client abort          400 malformed_multipart
//   more than concurrentRequestsMax uploads in progress in this process              503 server_busy
//
// The storage engine below is multer's memoryStorage plus two checks made while bytes arrive, so a
// bad upload is refused before it is buffered: the running total of the request's files, and the
// file type, recognised from the file's first bytes (the client's Content-Type is not trusted).
import multer from 'multer';
import type { Request, RequestHandler, Response } from 'express';
import type { ZodError } from 'zod';
import { ApiError, invalidParam } from '../errors.js';
import { inFlightLimit } from './in-flight.js';
import { keyOf } from './json-body.js';

export interface MultipartLimits {
  filesMax: number;
  fileBytesMax: number;
  totalFileBytesMax: number;
  /** Non-file parts. */
  fieldsMax: number;
  /** All parts. */
  partsMax: number;
  /** Bytes of one text value. */
  fieldBytesMax: number;
  /** Bytes of a part name. */
  partNameBytesMax: number;
  /** Uploads held in memory at once by this process (each up to totalFileBytesMax), until answered. */
  concurrentRequestsMax: number;
}

export interface FileTypeCheck {
  /** Bytes of a file's head `detect` needs to decide. */
  headBytes: number;
  /** The file's type from its head (or the whole file when shorter), null when not accepted. */
  detect(head: Uint8Array): Promise<string | null>;
  /** What an accepted file is, for error messages ("an audio file (WAV, MP3, ...)"). */
  expected: string;
}

export interface UploadedFile {
  part: string;
  /** Client-supplied, untrusted; for messages only. */
  filename: string;
  client_content_type: string;
  /** Recognised from the content by FileTypeCheck.detect. */
  type: string;
  bytes: number;
  buffer: Buffer;
}

export interface MultipartForm {
  fields: Map<string, string>;
  files: UploadedFile[];
}

export interface MultipartOptions {
  limits: MultipartLimits;
  /** Parts that carry files. */
  fileParts: readonly string[];
  /** Parts that carry one text value each. */
  fieldParts: readonly string[];
  fileType: FileTypeCheck;
  /** Text parts named `part[key]` (one level, as the openai SDKs send objects), listed in fieldParts by that name. */
  nestedFieldParts?: boolean;
  /** Text parts allowed more than fieldBytesMax, each with its own bound (a file sent as a data: URL); the request limit grows by theirs. */
  largeFields?: Readonly<Record<string, number>>;
}

/** Multipart framing (boundaries, part headers) allowed on top of the files' bytes. */
const FRAMING_ALLOWANCE_BYTES = 1024 * 1024;
const MiB = 1024 * 1024;

const bytesText = (n: number) => (n % MiB === 0 ? `${n / MiB} MiB (${n} bytes)` : `${n} bytes`);
const shortName = (s: string) => (s.length > 100 ? `${s.slice(0, 97)}...` : s);
const invalid = (code: string, message: string, param: string | null = null) =>
  new ApiError(400, 'invalid_request_error', code, message, param);

interface RequestState {
  totalBytes: number;
  /** The file part being received, if any: a truncation inside it names it. */
  openPart: string | null;
}

/** The 415 for file `name` (in `part`) whose content is not of the type the route accepts. */
const fileNotAccepted = (name: string, part: string, fileType: FileTypeCheck) =>
  new ApiError(
    415,
    'invalid_request_error',
    'unsupported_file_type',
    `file "${name}" is not ${fileType.expected}; its content was not recognised`,
    part,
  );

/** The 413 for files that together exceed totalFileBytesMax (named by the part where the limit was crossed). */
const filesTooLarge = (limits: MultipartLimits, part: string) =>
  new ApiError(413, 'invalid_request_error', 'upload_too_large', `the files together exceed ${bytesText(limits.totalFileBytesMax)}`, part);

/**
 * Keeps each file in memory, counting the bytes of the request's files against totalFileBytesMax,
 * and checks its content's type on its head (the stream paused meanwhile) or, for a shorter file, on
 * the whole; an empty file or one of another type is refused.
 */
function memoryEngine(opts: MultipartOptions, states: WeakMap<Request, RequestState>): multer.StorageEngine {
  const { limits, fileType } = opts;
  return {
    _handleFile(req, file, cb) {
      const state = states.get(req)!;
      state.openPart = file.fieldname;
      const chunks: Buffer[] = [];
      let bytes = 0;
      let detected: string | null = null;
      let detecting = false;
      let failed = false;
      const fail = (err: ApiError) => {
        failed = true;
        chunks.length = 0;
        state.openPart = null;
        cb(err);
      };
      const name = shortName(file.originalname);
      const notAccepted = () => fileNotAccepted(name, file.fieldname, fileType);
      file.stream.on('data', (chunk: Buffer) => {
        if (failed) return; // keep consuming: multer drains the request before answering
        bytes += chunk.length;
        state.totalBytes += chunk.length;
        if (state.totalBytes > limits.totalFileBytesMax) return fail(filesTooLarge(limits, file.fieldname));
        chunks.push(chunk);
        if (detected === null && !detecting && bytes >= fileType.headBytes) {
          // Decided on the head, before the rest is read: the stream waits for the answer.
          detecting = true;
          file.stream.pause();
          const decided = (type: string | null) => {
            detecting = false;
            file.stream.resume(); // also after a refusal: the rest is drained (and ignored)
            if (failed) return;
            if (!type) return fail(notAccepted());
            detected = type;
          };
          fileType.detect(Buffer.concat(chunks).subarray(0, fileType.headBytes)).then(decided, () => decided(null));
        }
      });
      file.stream.on('end', () => {
        if (failed) return;
        state.openPart = null;
        // Truncated by busboy at the size limit: multer reports LIMIT_FILE_SIZE and ignores this file.
        if ((file.stream as { truncated?: boolean }).truncated) return cb(null, { size: bytes });
        if (bytes === 0) return fail(invalid('empty_file', `file "${name}" is empty`, file.fieldname));
        const buffer = Buffer.concat(chunks);
        if (detected !== null) return cb(null, { buffer, size: bytes, detectedType: detected } as Partial<Express.Multer.File>);
        fileType.detect(buffer).then(
          (type) => {
            if (failed) return;
            if (!type) return fail(notAccepted());
            cb(null, { buffer, size: bytes, detectedType: type } as Partial<Express.Multer.File>);
          },
          () => fail(notAccepted()),
        );
      });
    },
    _removeFile(_req, file, cb) {
      delete (file as Partial<Express.Multer.File>).buffer;
      cb(null);
    },
  };
}

/** The bound of text part `part`: its own when it is a large field, else fieldBytesMax. */
const partBytesMax = (part: string | null, opts: MultipartOptions) =>
  (part !== null ? opts.largeFields?.[part] : undefined) ?? opts.limits.fieldBytesMax;
const fieldTooLong = (part: string | null, opts: MultipartOptions) =>
  invalid('invalid_parameter', `part "${part}" is too long: at most ${partBytesMax(part, opts)} bytes`, part);

/** Turns anything multer or busboy reports into a 4xx ApiError. */
function toApiError(err: unknown, opts: MultipartOptions, state: RequestState): ApiError {
  if (err instanceof ApiError) return err;
  const { limits } = opts;
  if (err instanceof multer.MulterError) {
    // multer 2.5 codes and fields, some newer than @types/multer knows
    const e = err as { code: string; field?: string; filename?: string; message: string };
    const part = e.field ?? null;
    const file = e.filename ? ` "${shortName(e.filename)}"` : '';
    switch (e.code) {
      case 'LIMIT_FILE_SIZE':
        return new ApiError(
          413,
          'invalid_request_error',
          'file_too_large',
          `file${file} exceeds ${bytesText(limits.fileBytesMax)}; each file may have at most that`,
          part,
        );
      case 'LIMIT_FILE_COUNT':
        return invalid('too_many_files', `too many files: at most ${limits.filesMax} per request`, opts.fileParts[0] ?? null);
      case 'LIMIT_FIELD_COUNT':
        return invalid('too_many_parts', `too many text parts: at most ${limits.fieldsMax}`);
      case 'LIMIT_PART_COUNT':
        return invalid('too_many_parts', `too many parts: at most ${limits.partsMax}`);
      case 'LIMIT_FIELD_VALUE':
        return fieldTooLong(part, opts);
      case 'LIMIT_FIELD_KEY':
        return invalid('invalid_part_name', `a part name is longer than ${limits.partNameBytesMax} bytes`);
      case 'MISSING_FIELD_NAME':
        return invalid('malformed_multipart', 'a part has no name (Content-Disposition: form-data; name="...")');
      case 'LIMIT_FIELD_NESTING':
      case 'LIMIT_FIELD_ARRAY_INDEX':
      case 'INVALID_FIELD_NAME':
      case 'LIMIT_UNEXPECTED_FILE':
        return invalid('unknown_parameter', `unknown part: ${part}`, part);
      default:
        return invalid('malformed_multipart', `invalid multipart body: ${e.message}`, part);
    }
  }
  const message = err instanceof Error ? err.message : String(err);
  if (/^Unexpected end of (form|file)/.test(message)) {
    return invalid('malformed_multipart', 'the multipart body ended before its closing boundary (truncated upload?)', state.openPart);
  }
  if (message === 'Malformed part header')
    return invalid('malformed_multipart', 'a part of the multipart body has a malformed header', state.openPart);
  if (/Boundary not found/i.test(message))
    return invalid('malformed_multipart', 'the Content-Type multipart/form-data has no boundary parameter');
  if (/content type/i.test(message)) {
    return new ApiError(
      415,
      'invalid_request_error',
      'unsupported_media_type',
      'send the request body as multipart/form-data with a boundary',
    );
  }
  if (/^Request (aborted|closed)/.test(message))
    return invalid('request_aborted', 'the request body was not received in full', state.openPart);
  return invalid('malformed_multipart', 'the multipart body could not be parsed', state.openPart);
}

/** The 413 for a request body over `maxRequestBytes`; the connection is closed after the answer. */
const requestTooLarge = (bytes: string, maxRequestBytes: number) =>
  new ApiError(
    413,
    'invalid_request_error',
    'request_too_large',
    `request body of ${bytes} bytes exceeds ${bytesText(maxRequestBytes)}`,
    null,
    { Connection: 'close' },
  );

/** multer's options with multer 2.5's `streamHandler` (feeds busboy; not in @types/multer). */
type MulterOptions = multer.Options & { streamHandler(req: Request, busboy: NodeJS.WritableStream & { destroy(err: Error): void }): void };

/**
 * multer's options: files kept in memory by `memoryEngine`, busboy's limits (every text part within
 * the largest text part's bound, each checked against its own afterwards), the request's bytes
 * counted as they arrive, and a file in a part other than `fileParts` refused.
 */
function multerOptions(opts: MultipartOptions, states: WeakMap<Request, RequestState>, maxRequestBytes: number): MulterOptions {
  const { limits } = opts;
  const large = Object.values(opts.largeFields ?? {});
  return {
    storage: memoryEngine(opts, states),
    defParamCharset: 'utf8',
    limits: {
      files: limits.filesMax,
      fileSize: limits.fileBytesMax,
      fields: limits.fieldsMax,
      parts: limits.partsMax,
      fieldSize: Math.max(limits.fieldBytesMax, ...large),
      fieldNameSize: limits.partNameBytesMax,
      fieldNestingDepth: opts.nestedFieldParts ? 1 : 0,
      headerPairs: 16,
    },
    // The bytes received are counted as they arrive: a body without a Content-Length stops at the limit.
    streamHandler(req: Request, busboy: NodeJS.WritableStream & { destroy(err: Error): void }) {
      let received = 0;
      const count = (chunk: Buffer) => {
        received += chunk.length;
        if (received <= maxRequestBytes) return;
        req.off('data', count);
        req.unpipe(busboy);
        req.resume(); // the rest is read and dropped, so the answer can be sent
        busboy.destroy(requestTooLarge(`${received}+`, maxRequestBytes));
      };
      req.on('data', count);
      req.pipe(busboy);
    },
    fileFilter(_req, file, cb) {
      if (!opts.fileParts.includes(file.fieldname)) {
        return cb(
          invalid(
            'unknown_parameter',
            `unexpected file in part "${file.fieldname}"; files go in part ${opts.fileParts.join(', ')}`,
            file.fieldname,
          ),
        );
      }
      cb(null, true);
    },
  };
}

/**
 * Parses a multipart/form-data body into `multipartOf(res)`: each allowed text part at most once,
 * files only in `fileParts`, within `limits`. Anything else is a 4xx.
 */
export function multipartForm(opts: MultipartOptions): RequestHandler {
  const { limits } = opts;
  const states = new WeakMap<Request, RequestState>();
  const large = Object.values(opts.largeFields ?? {});
  const maxRequestBytes = limits.totalFileBytesMax + large.reduce((a, b) => a + b, 0) + FRAMING_ALLOWANCE_BYTES;
  const tooLarge = (bytes: string) => requestTooLarge(bytes, maxRequestBytes);
  const inFlight = inFlightLimit(limits.concurrentRequestsMax, 'uploads');
  const upload = multer(multerOptions(opts, states, maxRequestBytes)).any();

  return (req, res, next) => {
    if (!req.is('multipart/form-data')) {
      return next(new ApiError(415, 'invalid_request_error', 'unsupported_media_type', 'send the request body as multipart/form-data'));
    }
    const declared = Number(req.get('content-length') ?? 0);
    if (declared > maxRequestBytes) {
      // Refused unread; the connection is closed after the answer rather than reading the body.
      return next(tooLarge(String(declared)));
    }
    // Held from here until the response is finished or the connection is gone: the buffers live that long.
    try {
      inFlight.acquire(res, keyOf(res));
    } catch (err) {
      return next(err);
    }
    const state: RequestState = { totalBytes: 0, openPart: null };
    states.set(req, state);
    upload(req, res, (err?: unknown) => {
      if (err) return next(toApiError(err, opts, state));
      try {
        res.locals['multipart'] = collect(req, opts);
      } catch (e) {
        return next(e);
      }
      next();
    });
  };
}

function collect(req: Request, opts: MultipartOptions): MultipartForm {
  const fields = new Map<string, string>();
  const entries = Object.entries((req.body ?? {}) as Record<string, unknown>).flatMap(([part, value]): [string, unknown][] =>
    opts.nestedFieldParts && typeof value === 'object' && value !== null && !Array.isArray(value)
      ? Object.entries(value).map(([k, v]): [string, unknown] => [`${part}[${k}]`, v])
      : [[part, value]],
  );
  for (const [part, value] of entries) {
    if (opts.fileParts.includes(part)) throw invalid('invalid_parameter', `part "${part}" must be a file upload (with a filename)`, part);
    if (!opts.fieldParts.includes(part)) throw invalid('unknown_parameter', `unknown part: ${part}`, part);
    if (typeof value !== 'string') throw invalid('invalid_parameter', `part "${part}" must be given once, as text`, part);
    if (Buffer.byteLength(value) > partBytesMax(part, opts)) throw fieldTooLong(part, opts);
    fields.set(part, value);
  }
  const files = ((req.files ?? []) as Express.Multer.File[]).map((f): UploadedFile => ({
    part: f.fieldname,
    filename: f.originalname,
    client_content_type: f.mimetype,
    type: (f as Express.Multer.File & { detectedType?: string }).detectedType ?? '',
    bytes: f.size,
    buffer: f.buffer,
  }));
  return { fields, files };
}

export function multipartOf(res: Response): MultipartForm {
  const form = res.locals['multipart'] as MultipartForm | undefined;
  if (!form) throw new Error('route reached without multipartForm');
  return form;
}

/**
 * The answer to a form whose parts a contract's schema refuses (./openapi.ts, `parts.invalid`): the first
 * part at fault, missing (absent from `input`) or invalid, by its name.
 */
export function partRefused(err: ZodError, input: Record<string, unknown>): ApiError {
  const part = String(err.issues[0]!.path[0] ?? '');
  if (input[part] === undefined)
    return new ApiError(400, 'invalid_request_error', 'missing_parameter', `missing required part: ${part}`, part);
  return invalidParam(part, `${part} ${err.issues[0]!.message}`);
}
