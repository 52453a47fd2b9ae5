// A local stand-in for the ElevenLabs API, reproducing the documented wire format of the four
// endpoints the adapter uses (src/providers/voice/elevenlabs.ts), for contract and end-to-end tests:
//
//   POST   /v1/voices/add                 multipart/form-data: `name` (required), `files` (one part per
//                                         recording, required), `remove_background_noise`, `description`,
//                                         `labels` (optional) -> 200 {"voice_id", "requires_verification"}
//   DELETE /v1/voices/{voice_id}          -> 200 {"status": "ok"}; unknown voice -> 404 voice_not_found
//   POST   /v1/text-to-speech/{voice_id}  ?output_format=<codec_rate[_bitrate]> (default mp3_44100_128),
//                                         JSON {"text" (required), "model_id", "voice_settings", ...}
//                                         -> 200 audio bytes (pcm_*: real 16-bit mono PCM at that rate)
//   POST   /v1/text-to-speech/{voice_id}/stream
//                                         the same query, body, key and refusals -> 200 the same audio
//                                         bytes as a chunked body (no Content-Length), a chunk written
//                                         at a time while "made": STREAM_CHUNK_BYTES, an odd number, so
//                                         chunks split samples as network chunks may; one every
//                                         STREAM_CHUNK_INTERVAL_MS
//
//   POST   /v1/text-to-speech/{voice_id}/stream/with-timestamps
//                                         the same query, body, key and refusals -> 200 newline-separated
//                                         JSON objects {"audio_base64", "alignment": {"characters",
//                                         "character_start_times_seconds", "character_end_times_seconds"},
//                                         "normalized_alignment"}: each the next audio and the characters it
//                                         speaks, times in seconds from the start of the audio (50 ms per
//                                         character, as the fake's PCM), as
//                                         https://elevenlabs.io/docs/api-reference/text-to-speech/stream-with-timestamps
//                                         and https://elevenlabs.io/docs/api-reference/streaming-with-timestamps
//                                         document it
//
// The stream endpoint as https://elevenlabs.io/docs/api-reference/text-to-speech/stream documents it
// (query `output_format`, JSON `text`, `model_id`, `voice_settings`; answered with an audio stream, or
// the errors of the other endpoints), sending raw audio bytes with chunked transfer encoding as
// https://elevenlabs.io/docs/api-reference/streaming describes.
//
// An account holds a limited number of cloned voices (its plan's voice slots, help.elevenlabs.io "How many
// voice slots do I get per tier"): a clone beyond them is refused with 400 `voice_limit_reached`, "You have
// reached your maximum amount of custom voices (N / N). ..." (`voiceSlots`, unlimited by default).
// Every request needs the account key in `xi-api-key` (else 401 invalid_api_key). Errors use the API's
// envelopes: `{"detail": {"status", "message"}}`, and 422 `{"detail": [{"loc", "msg", "type"}]}` for a
// request that fails validation (FastAPI's shape). The default ("premade") voices exist for speech.
//
// Tests script faults per endpoint (`fail`): a status with a body (JSON or raw, e.g. malformed JSON on a
// 200), extra headers (Retry-After), a delay (beyond the client's time limit), or a connection reset;
// on the stream, the connection cut or the body stalled once some audio has gone out.
// Every request is recorded (method, path, query, headers, JSON body or multipart parts). The WebSocket of
// text to speech from partial input (stream-input) is ./elevenlabs-stream-input-fake.ts, on the same server.
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import multer from 'multer';
import { ELEVENLABS_PRESET_VOICES } from '../../src/providers/voice/elevenlabs.js';
import { closeServer, listenOnLoopback } from './fake-http.js';
import { attachStreamInput, type StreamInputFake } from './elevenlabs-stream-input-fake.js';

export type FakeRoute = 'clone' | 'delete' | 'speech' | 'stream' | 'timed';

export interface RecordedFile {
  field: string;
  filename: string;
  contentType: string;
  data: Buffer;
}

export interface RecordedRequest {
  route: FakeRoute | null;
  method: string;
  path: string;
  query: Record<string, string>;
  /** Lower-cased names, as received. */
  headers: Record<string, string>;
  json?: unknown;
  /** Multipart text parts, in order (a name may repeat). */
  fields?: [string, string][];
  files?: RecordedFile[];
}

export interface FakeVoice {
  voice_id: string;
  name: string;
  files: RecordedFile[];
  requires_verification: boolean;
}

export interface Fault {
  /** Answer with this status (and `body`) instead of handling the request. */
  status?: number;
  /** An object is sent as JSON; a string is sent as is (content type application/json unless `headers` say otherwise). */
  body?: unknown;
  headers?: Record<string, string>;
  /** Wait this long first (then answer `status`, or handle the request normally when no status is given). */
  delayMs?: number;
  /** Destroy the connection without answering. */
  reset?: boolean;
  /** The stream: answer normally, but destroy the connection once this many bytes of audio went out. */
  cutAfterBytes?: number;
  /** The stream: answer normally, but send nothing more once this many bytes of audio went out. */
  stallAfterBytes?: number;
}

export const FAKE_PCM_SAMPLES_PER_CHAR_AT_22050 = 1_102;
export const STREAM_CHUNK_BYTES = 4_001;
export const STREAM_CHUNK_INTERVAL_MS = 5;

/** Output formats the API documents for POST /v1/text-to-speech/{voice_id}. */
export const OUTPUT_FORMATS = [
  'mp3_22050_32',
  'mp3_44100_32',
  'mp3_44100_64',
  'mp3_44100_96',
  'mp3_44100_128',
  'mp3_44100_192',
  'pcm_8000',
  'pcm_16000',
  'pcm_22050',
  'pcm_24000',
  'pcm_44100',
  'pcm_48000',
  'ulaw_8000',
  'alaw_8000',
  'opus_48000_32',
  'opus_48000_64',
  'opus_48000_96',
  'opus_48000_128',
  'opus_48000_192',
] as const;

/**
 * The fake's speech: 50 ms of a tone per character (silence for whitespace and punctuation), its
 * pitch from the voice and the character; 16-bit little-endian mono at `rateHz`. Deterministic.
 */
export function fakeSpeechPcm(voice_id: string, text: string, rateHz: number): Buffer {
  const chars = [...text];
  const perChar = Math.round(rateHz * 0.05);
  const out = Buffer.alloc(chars.length * perChar * 2);
  const base = 120 + (createHash('sha256').update(voice_id).digest().readUInt16BE(0) % 200);
  chars.forEach((ch, i) => {
    if (/[\s\p{P}]/u.test(ch)) return;
    const hz = base * 2 ** ((ch.codePointAt(0)! % 24) / 12);
    for (let n = 0; n < perChar; n++) {
      const env = Math.min(1, n / 100, (perChar - 1 - n) / 100);
      out.writeInt16LE(Math.round(9000 * env * Math.sin((2 * Math.PI * hz * n) / rateHz)), (i * perChar + n) * 2);
    }
  });
  return out;
}

/** A multipart request's text parts (in order; a name may repeat) and files, as multer parsed them. */
export function multipartParts(req: Request): { fields: [string, string][]; files: RecordedFile[] } {
  const fields: [string, string][] = [];
  for (const [k, v] of Object.entries((req.body ?? {}) as Record<string, string | string[]>)) {
    for (const one of Array.isArray(v) ? v : [v]) fields.push([k, one]);
  }
  const files: RecordedFile[] = ((req.files as Express.Multer.File[] | undefined) ?? []).map((f) => ({
    field: f.fieldname,
    filename: f.originalname,
    contentType: f.mimetype,
    data: f.buffer,
  }));
  return { fields, files };
}

const validation = (loc: (string | number)[], msg: string, type: string) => ({ detail: [{ loc, msg, type }] });
const problem = (status: string, message: string) => ({ detail: { status, message } });

export interface ElevenLabsFake {
  url: string;
  apiKey: string;
  requests: RecordedRequest[];
  voices: Map<string, FakeVoice>;
  /** `requires_verification` of the voices cloned from now on. */
  requiresVerification: boolean;
  /** The next `times` requests to `route` meet `fault`. */
  fail(route: FakeRoute, fault: Fault, times?: number): void;
  /** Faults not yet met. */
  pendingFaults(route: FakeRoute): number;
  requestsTo(route: FakeRoute): RecordedRequest[];
  /** The WebSocket of text to speech from partial input (./elevenlabs-stream-input-fake.ts). */
  streamInput: StreamInputFake;
  close(): Promise<void>;
}

export async function startElevenLabsFake(opts: { apiKey?: string; voiceSlots?: number } = {}): Promise<ElevenLabsFake> {
  const apiKey = opts.apiKey ?? 'test-key';
  const requests: RecordedRequest[] = [];
  const voices = new Map<string, FakeVoice>();
  const faults: Record<FakeRoute, { fault: Fault; remaining: number }[]> = { clone: [], delete: [], speech: [], stream: [], timed: [] };
  const timers = new Set<NodeJS.Timeout>();
  const state = { requiresVerification: false };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        timers.delete(t);
        resolve();
      }, ms);
      timers.add(t);
    });

  const record = (route: FakeRoute | null, req: Request, extra: Partial<RecordedRequest> = {}): void => {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    const query: Record<string, string> = {};
    for (const [k, v] of new URL(req.originalUrl, 'http://fake').searchParams) query[k] = v;
    requests.push({ route, method: req.method, path: req.path, query, headers, ...extra });
  };

  /**
   * The scripted fault for this request, if any: `answered` when it answered (or dropped) the request;
   * otherwise the request is handled, and the fault met (if any) is for that handling to apply.
   */
  const applyFault = async (route: FakeRoute, req: Request, res: Response): Promise<{ answered: boolean; fault?: Fault }> => {
    const queue = faults[route];
    const next = queue[0];
    if (!next) return { answered: false };
    if (--next.remaining <= 0) queue.shift();
    const { fault } = next;
    if (fault.delayMs) await sleep(fault.delayMs);
    if (res.destroyed || req.socket.destroyed) return { answered: true }; // the client gave up
    if (fault.reset) {
      req.socket.destroy();
      return { answered: true };
    }
    if (fault.status === undefined) return { answered: false, fault };
    res.status(fault.status).set(fault.headers ?? {});
    if (typeof fault.body === 'string') {
      if (!res.get('content-type')) res.type('application/json');
      res.send(Buffer.from(fault.body));
    } else if (fault.body === undefined) {
      res.end();
    } else {
      res.json(fault.body);
    }
    return { answered: true };
  };

  const authorized = (req: Request, res: Response): boolean => {
    const key = req.get('xi-api-key');
    if (key === apiKey) return true;
    res
      .status(401)
      .json(
        key
          ? problem('invalid_api_key', 'Invalid API key')
          : problem('invalid_api_key', 'No xi-api-key header received; please provide one.'),
      );
    return false;
  };

  const app = express();
  const upload = multer({ storage: multer.memoryStorage(), limits: { fileSize: 50 * 1024 * 1024 } }).any();

  app.post('/v1/voices/add', upload, async (req, res) => {
    const { fields, files } = multipartParts(req);
    record('clone', req, { fields, files });
    if ((await applyFault('clone', req, res)).answered) return;
    if (!authorized(req, res)) return;
    const name = fields.find(([k]) => k === 'name')?.[1];
    if (name === undefined) return void res.status(422).json(validation(['body', 'name'], 'Field required', 'missing'));
    const samples = files.filter((f) => f.field === 'files');
    if (samples.length === 0) return void res.status(422).json(validation(['body', 'files'], 'Field required', 'missing'));
    if (opts.voiceSlots !== undefined && voices.size >= opts.voiceSlots) {
      const n = opts.voiceSlots;
      return void res
        .status(400)
        .json(
          problem(
            'voice_limit_reached',
            `You have reached your maximum amount of custom voices (${n} / ${n}). You can upgrade your subscription to increase your custom voice limit.`,
          ),
        );
    }
    const voice_id = randomBytes(15).toString('base64url').replace(/[-_]/g, 'x').slice(0, 20);
    voices.set(voice_id, { voice_id, name, files: samples, requires_verification: state.requiresVerification });
    res.json({ voice_id, requires_verification: state.requiresVerification });
  });

  app.delete('/v1/voices/:voice_id', async (req, res) => {
    record('delete', req);
    if ((await applyFault('delete', req, res)).answered) return;
    if (!authorized(req, res)) return;
    const id = String(req.params['voice_id']);
    if (!voices.delete(id)) return void res.status(404).json(problem('voice_not_found', `A voice with the voice_id ${id} was not found.`));
    res.json({ status: 'ok' });
  });

  /** The audio a speech request asks for, or null when it was refused (answered here). */
  const speechAudio = (req: Request, res: Response): { type: string; bytes: Buffer } | null => {
    const refuse = (status: number, body: unknown) => {
      res.status(status).json(body);
      return null;
    };
    const format = typeof req.query['output_format'] === 'string' ? req.query['output_format'] : 'mp3_44100_128';
    if (!(OUTPUT_FORMATS as readonly string[]).includes(format)) {
      return refuse(
        422,
        validation(['query', 'output_format'], `Input should be ${OUTPUT_FORMATS.map((f) => `'${f}'`).join(', ')}`, 'enum'),
      );
    }
    const body = req.body as Record<string, unknown> | undefined;
    if (!body || typeof body !== 'object' || Array.isArray(body)) return refuse(422, validation(['body'], 'Field required', 'missing'));
    if (typeof body['text'] !== 'string') return refuse(422, validation(['body', 'text'], 'Field required', 'missing'));
    if (body['model_id'] !== undefined && typeof body['model_id'] !== 'string') {
      return refuse(422, validation(['body', 'model_id'], 'Input should be a valid string', 'string_type'));
    }
    const id = String(req.params['voice_id']);
    if (!voices.has(id) && !(ELEVENLABS_PRESET_VOICES as readonly string[]).includes(id)) {
      return refuse(404, problem('voice_not_found', `A voice with the voice_id ${id} was not found.`));
    }
    const [codec, rate] = format.split('_');
    if (codec === 'pcm') return { type: 'audio/pcm', bytes: fakeSpeechPcm(id, body['text'], Number(rate)) };
    if (codec === 'mp3') {
      // MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz) of silence: one per 10 characters.
      const frame = Buffer.alloc(417);
      Buffer.from([0xff, 0xfb, 0x90, 0x64]).copy(frame);
      return {
        type: 'audio/mpeg',
        bytes: Buffer.concat(Array.from({ length: Math.max(1, Math.ceil(body['text'].length / 10)) }, () => frame)),
      };
    }
    return { type: 'application/octet-stream', bytes: Buffer.alloc(Math.max(1, body['text'].length) * 400) };
  };

  app.post('/v1/text-to-speech/:voice_id', express.json({ limit: '1mb' }), async (req, res) => {
    record('speech', req, { json: req.body });
    if ((await applyFault('speech', req, res)).answered) return;
    if (!authorized(req, res)) return;
    const audio = speechAudio(req, res);
    if (audio) res.type(audio.type).send(audio.bytes);
  });

  app.post('/v1/text-to-speech/:voice_id/stream', express.json({ limit: '1mb' }), async (req, res) => {
    record('stream', req, { json: req.body });
    const { answered, fault } = await applyFault('stream', req, res);
    if (answered || !authorized(req, res)) return;
    const audio = speechAudio(req, res);
    if (!audio) return;
    // No Content-Length: Node sends the body chunked, a chunk per write.
    res.status(200).type(audio.type);
    res.flushHeaders();
    const limit = fault?.cutAfterBytes ?? fault?.stallAfterBytes;
    for (let at = 0; at < audio.bytes.length; at += STREAM_CHUNK_BYTES) {
      if (res.destroyed) return; // the client went away
      const chunk = audio.bytes.subarray(at, at + STREAM_CHUNK_BYTES);
      if (limit !== undefined && at + chunk.length > limit) {
        res.write(chunk.subarray(0, Math.max(0, limit - at)));
        if (fault?.cutAfterBytes === undefined) return; // stalled: left open until the client gives up
        await sleep(STREAM_CHUNK_INTERVAL_MS); // what was written reaches the client first
        req.socket.destroy();
        return;
      }
      res.write(chunk);
      await sleep(STREAM_CHUNK_INTERVAL_MS);
    }
    res.end();
  });

  app.post('/v1/text-to-speech/:voice_id/stream/with-timestamps', express.json({ limit: '1mb' }), async (req, res) => {
    record('timed', req, { json: req.body });
    const { answered } = await applyFault('timed', req, res);
    if (answered || !authorized(req, res)) return;
    const audio = speechAudio(req, res);
    if (!audio) return;
    const chars = [...(req.body as { text: string }).text];
    const rate = Number(String(req.query['output_format'] ?? '').split('_')[1]) || 44_100;
    const bytesPerChar = Math.round(rate * 0.05) * 2;
    res.status(200).type('application/json');
    res.flushHeaders();
    // A few characters' audio per object, with their alignment.
    const CHARS_PER_OBJECT = 7;
    for (let i = 0; i < chars.length && !res.destroyed; i += CHARS_PER_OBJECT) {
      const these = chars.slice(i, i + CHARS_PER_OBJECT);
      const starts = these.map((_, k) => Math.round((i + k) * 50) / 1000);
      const alignment = {
        characters: these,
        character_start_times_seconds: starts,
        character_end_times_seconds: starts.map((s) => Math.round((s + 0.05) * 1000) / 1000),
      };
      const pcm = audio.bytes.subarray(i * bytesPerChar, (i + these.length) * bytesPerChar);
      res.write(`${JSON.stringify({ audio_base64: pcm.toString('base64'), alignment, normalized_alignment: alignment })}\n`);
      await sleep(STREAM_CHUNK_INTERVAL_MS);
    }
    res.end();
  });

  // Unparseable JSON, as FastAPI reports it.
  app.use((err: unknown, req: Request, res: Response, next: NextFunction) => {
    if ((err as { type?: string }).type === 'entity.parse.failed') {
      record(req.path.endsWith('/stream') ? 'stream' : 'speech', req);
      return void res.status(422).json(validation(['body', 0], 'JSON decode error', 'json_invalid'));
    }
    next(err);
  });
  app.use((req, res) => {
    record(null, req);
    res.status(404).json({ detail: 'Not Found' });
  });

  const server = http.createServer(app);
  const streamInput = attachStreamInput(server, {
    apiKey,
    hasVoice: (id) => voices.has(id),
    pcm: fakeSpeechPcm,
    chunkIntervalMs: STREAM_CHUNK_INTERVAL_MS,
  });
  const url = await listenOnLoopback(server);

  return {
    url,
    apiKey,
    requests,
    voices,
    get requiresVerification() {
      return state.requiresVerification;
    },
    set requiresVerification(v: boolean) {
      state.requiresVerification = v;
    },
    fail(route, fault, times = 1) {
      faults[route].push({ fault, remaining: times });
    },
    pendingFaults(route) {
      return faults[route].reduce((n, f) => n + f.remaining, 0);
    },
    requestsTo(route) {
      return requests.filter((r) => r.route === route);
    },
    streamInput,
    async close() {
      streamInput.close();
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await closeServer(server);
    },
  };
}
