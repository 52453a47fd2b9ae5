// A local stand-in for Cartesia's API, reproducing the documented wire format of the endpoints the adapter
// uses (src/providers/voice/cartesia.ts), for contract and end-to-end tests. From Cartesia's API reference:
//   https://docs.cartesia.ai/use-the-api/api-conventions   Authorization: Bearer <key>; Cartesia-Version required
//   https://docs.cartesia.ai/use-the-api/api-errors        {"error_code", "title", "message", "request_id", "doc_url"?}
//   https://docs.cartesia.ai/api-reference/voices/clone    POST /voices/clone (multipart: clip, name, language, ...)
//   https://docs.cartesia.ai/api-reference/voices/delete   DELETE /voices/{id} -> 204
//   https://docs.cartesia.ai/api-reference/tts/bytes       POST /tts/bytes -> the audio bytes, streamed
//   https://docs.cartesia.ai/api-reference/tts/sse         POST /tts/sse -> events chunk / timestamps / done / error
//   https://docs.cartesia.ai/api-reference/tts/websocket   GET /tts/websocket (./cartesia-websocket-fake.ts, `ws`)
//
//   POST   /voices/clone   `clip` (required, one audio file), `name` (required), `language` (required), `description`
//                          -> 200 voice metadata {"id", "user_id", "name", "description", "language", "created_at", ...}
//   DELETE /voices/{id}    -> 204; unknown -> 404
//   POST   /tts/bytes      JSON {"model_id", "transcript", "voice": "<id>" | {"id", ...}, "output_format":
//                          {"container": "raw" | "wav", "encoding", "sample_rate"}, "language"?, "generation_config"?}
//                          -> 200 the audio as a chunked body (raw pcm_s16le: real 16-bit mono PCM at the rate)
//   POST   /tts/sse        the same JSON (container raw), "add_timestamps"? -> text/event-stream of `data: {...}`
//                          events: {"type": "chunk", "data", "done": false, "status_code": 206, "step_time"},
//                          with add_timestamps {"type": "timestamps", "word_timestamps": {"words", "start", "end"}},
//                          then {"type": "done", "done": true, "status_code": 200}
//
// Refusals: 401 (no or a wrong key), 400 (no Cartesia-Version header, a bad output_format, an empty transcript,
// an unknown model), 422 (a field missing or of the wrong type), 404 (unknown voice), 429 concurrency_limited
// (scripted, at most `concurrency` requests at once when set). Errors are the documented JSON error object.
// Tests script faults per route (`fail`), as the ElevenLabs fake does. Every request is recorded.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import multer from 'multer';
import { CARTESIA_PRESET_VOICES } from '../../src/providers/voice/cartesia.js';
import { closeServer, listenOnLoopback } from './fake-http.js';
import { attachCartesiaWebSocket, type CartesiaWsFake } from './cartesia-websocket-fake.js';
import { fakeSpeechPcm, multipartParts, type Fault, type RecordedFile, type RecordedRequest } from './elevenlabs-fake.js';

export type CartesiaRoute = 'clone' | 'delete' | 'bytes' | 'sse';

/** The models Cartesia lists for text to speech (its reference's TTSModel). */
const MODELS = ['sonic-3.5', 'sonic-3', 'sonic-3.5-2026-05-04', 'sonic-3-2026-01-12', 'sonic-3-2025-10-27', 'sonic-latest'];
const RATES = [8000, 16000, 22050, 24000, 44100, 48000];
export const CARTESIA_STREAM_CHUNK_BYTES = 4_801;

export interface CartesiaFake {
  url: string;
  apiKey: string;
  requests: (RecordedRequest & { cartesiaRoute: CartesiaRoute | null })[];
  voices: Map<string, { id: string; name: string; language: string; clip: RecordedFile }>;
  fail(route: CartesiaRoute, fault: Fault, times?: number): void;
  requestsTo(route: CartesiaRoute): RecordedRequest[];
  /** The WebSocket of contexts (GET /tts/websocket). */
  ws: CartesiaWsFake;
  close(): Promise<void>;
}

const errorBody = (error_code: string | null, title: string, message: string) => ({
  error_code,
  title,
  message,
  request_id: randomUUID(),
  doc_url: 'https://docs.cartesia.ai/use-the-api/api-errors',
});

/** Words of `text` (split at white space) with the times the fake speaks them: 50 ms per character, as its PCM. */
export function fakeWordTimes(text: string): { words: string[]; start: number[]; end: number[] } {
  const out = { words: [] as string[], start: [] as number[], end: [] as number[] };
  let at = 0;
  for (const part of text.split(/(\s+)/u)) {
    const n = [...part].length;
    if (part.trim()) {
      out.words.push(part);
      out.start.push(Math.round(at * 50) / 1000);
      out.end.push(Math.round((at + n) * 50) / 1000);
    }
    at += n;
  }
  return out;
}

export async function startCartesiaFake(opts: { apiKey?: string; concurrency?: number } = {}): Promise<CartesiaFake> {
  const apiKey = opts.apiKey ?? 'sk_car_test';
  const requests: CartesiaFake['requests'] = [];
  const voices: CartesiaFake['voices'] = new Map();
  const faults: Record<CartesiaRoute, { fault: Fault; remaining: number }[]> = { clone: [], delete: [], bytes: [], sse: [] };
  let inFlight = 0;

  const record = (route: CartesiaRoute | null, req: Request, extra: Partial<RecordedRequest> = {}) => {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    requests.push({ route: null, cartesiaRoute: route, method: req.method, path: req.path, query: {}, headers, ...extra });
  };

  const refuse = (res: Response, status: number, code: string | null, title: string, message: string, headers = {}) =>
    void res
      .status(status)
      .set(headers)
      .json(errorBody(code, title, message));

  /** Faults, then the key, the version and the concurrency limit; false when the request was answered here. */
  const admitted = async (route: CartesiaRoute, req: Request, res: Response): Promise<boolean> => {
    const next = faults[route][0];
    if (next) {
      if (--next.remaining <= 0) faults[route].shift();
      const { fault } = next;
      if (fault.delayMs) await new Promise((r) => setTimeout(r, fault.delayMs));
      if (res.destroyed) return false;
      if (fault.reset) return (void req.socket.destroy(), false);
      if (fault.status !== undefined) {
        res.status(fault.status).set(fault.headers ?? {});
        if (typeof fault.body === 'string') res.type(res.get('content-type') ?? 'application/json').send(fault.body);
        else if (fault.body === undefined) res.end();
        else res.json(fault.body);
        return false;
      }
    }
    const auth = req.get('authorization');
    if (auth !== `Bearer ${apiKey}`) {
      refuse(res, 401, 'unauthorized', 'Unauthorized', auth ? 'Invalid API key.' : 'Missing Authorization header.');
      return false;
    }
    if (!/^\d{4}-\d{2}-\d{2}$/.test(req.get('cartesia-version') ?? '')) {
      refuse(res, 400, 'invalid_request', 'Invalid request', 'The Cartesia-Version header is required (a date such as 2026-03-01).');
      return false;
    }
    // TTS requests count against the plan's concurrency (this one included).
    if (opts.concurrency !== undefined && (route === 'bytes' || route === 'sse') && inFlight > opts.concurrency) {
      refuse(res, 429, 'concurrency_limited', 'Too many concurrent requests', "You have exceeded your plan's concurrency limit.");
      return false;
    }
    return true;
  };

  const app = express();
  const upload = multer({ storage: multer.memoryStorage(), limits: { fileSize: 50 * 1024 * 1024 } }).any();

  app.post('/voices/clone', upload, async (req, res) => {
    const { fields, files } = multipartParts(req);
    record('clone', req, { fields, files });
    if (!(await admitted('clone', req, res))) return;
    const field = (k: string) => fields.find(([n]) => n === k)?.[1];
    const clip = files.find((f) => f.field === 'clip');
    const name = field('name');
    const language = field('language');
    for (const [missing, what] of [
      [!clip, 'clip'],
      [name === undefined, 'name'],
      [language === undefined, 'language'],
    ] as const) {
      if (missing) return refuse(res, 422, 'validation_error', 'Invalid request', `${what}: Field required`);
    }
    if (clip!.data.length === 0) return refuse(res, 400, 'invalid_request', 'Invalid request', 'The clip is empty.');
    const id = randomUUID();
    voices.set(id, { id, name: name!, language: language!, clip: clip! });
    res.json({
      id,
      user_id: 'user_fake',
      is_public: false,
      access: 'private',
      visibility: 'owner',
      name,
      description: field('description') ?? '',
      tagline: '',
      created_at: new Date().toISOString(),
      language,
    });
  });

  app.delete('/voices/:id', async (req, res) => {
    record('delete', req);
    if (!(await admitted('delete', req, res))) return;
    const id = String(req.params['id']);
    if (!voices.delete(id)) return refuse(res, 404, 'not_found', 'Not found', `Voice ${id} not found.`);
    res.status(204).end();
  });

  /** The speech a TTS request asks for (PCM and its word times), or null when it was refused (answered here). */
  const speech = (req: Request, res: Response, sse: boolean) => {
    const body = req.body as Record<string, unknown> | undefined;
    if (!body || typeof body !== 'object') return (refuse(res, 422, 'validation_error', 'Invalid request', 'body: Field required'), null);
    for (const k of ['model_id', 'transcript', 'voice', 'output_format']) {
      if (body[k] === undefined) return (refuse(res, 422, 'validation_error', 'Invalid request', `${k}: Field required`), null);
    }
    if (typeof body['transcript'] !== 'string' || typeof body['model_id'] !== 'string') {
      return (refuse(res, 422, 'validation_error', 'Invalid request', 'transcript and model_id must be strings'), null);
    }
    if (!MODELS.includes(body['model_id'])) {
      return (refuse(res, 400, 'invalid_model', 'Invalid model', `Model ${body['model_id']} does not exist.`), null);
    }
    if (!body['transcript'].trim()) return (refuse(res, 400, 'invalid_request', 'Invalid request', 'The transcript is empty.'), null);
    const f = body['output_format'] as Record<string, unknown>;
    const containers = sse ? ['raw'] : ['raw', 'wav'];
    if (!containers.includes(f?.['container'] as string) || f['encoding'] !== 'pcm_s16le' || !RATES.includes(f['sample_rate'] as number)) {
      return (refuse(res, 400, 'invalid_output_format', 'Invalid output format', 'output_format is not supported here.'), null);
    }
    const v = body['voice'];
    const id = typeof v === 'string' ? v : typeof v === 'object' && v !== null ? (v as Record<string, unknown>)['id'] : undefined;
    if (typeof id !== 'string') return (refuse(res, 422, 'validation_error', 'Invalid request', 'voice.id: Field required'), null);
    if (!voices.has(id) && !(CARTESIA_PRESET_VOICES as readonly string[]).includes(id)) {
      return (refuse(res, 404, 'voice_not_found', 'Voice not found', `Voice ${id} not found.`), null);
    }
    const pcm = fakeSpeechPcm(id, body['transcript'], f['sample_rate'] as number);
    return { pcm, times: fakeWordTimes(body['transcript']), timestamps: body['add_timestamps'] === true };
  };

  const counted = (h: (req: Request, res: Response) => Promise<void>) => async (req: Request, res: Response) => {
    inFlight++;
    try {
      await h(req, res);
    } finally {
      inFlight--;
    }
  };

  app.post(
    '/tts/bytes',
    express.json({ limit: '1mb' }),
    counted(async (req, res) => {
      record('bytes', req, { json: req.body });
      if (!(await admitted('bytes', req, res))) return;
      const s = speech(req, res, false);
      if (!s) return;
      res.status(200).type('audio/pcm');
      res.flushHeaders();
      for (let at = 0; at < s.pcm.length && !res.destroyed; at += CARTESIA_STREAM_CHUNK_BYTES) {
        res.write(s.pcm.subarray(at, at + CARTESIA_STREAM_CHUNK_BYTES));
        await new Promise((r) => setTimeout(r, 2));
      }
      res.end();
    }),
  );

  app.post(
    '/tts/sse',
    express.json({ limit: '1mb' }),
    counted(async (req, res) => {
      record('sse', req, { json: req.body });
      if (!(await admitted('sse', req, res))) return;
      const s = speech(req, res, true);
      if (!s) return;
      res.status(200).set({ 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.flushHeaders();
      const send = (event: unknown) => res.write(`data: ${JSON.stringify(event)}\n\n`);
      const rate = (req.body as { output_format: { sample_rate: number } }).output_format.sample_rate;
      let word = 0;
      for (let at = 0; at < s.pcm.length && !res.destroyed; at += CARTESIA_STREAM_CHUNK_BYTES) {
        const chunk = s.pcm.subarray(at, at + CARTESIA_STREAM_CHUNK_BYTES);
        send({ type: 'chunk', data: chunk.toString('base64'), done: false, status_code: 206, step_time: 2 });
        // The words whose audio has been sent, each once.
        const sentS = (at + chunk.length) / 2 / rate;
        const from = word;
        while (word < s.times.words.length && s.times.end[word]! <= sentS + 1e-9) word++;
        if (s.timestamps && word > from) {
          const slice = (a: number[]) => a.slice(from, word);
          send({
            type: 'timestamps',
            done: false,
            status_code: 206,
            word_timestamps: { words: s.times.words.slice(from, word), start: slice(s.times.start), end: slice(s.times.end) },
          });
        }
        await new Promise((r) => setTimeout(r, 2));
      }
      send({ type: 'done', done: true, status_code: 200 });
      res.end();
    }),
  );

  app.use((req, res) => {
    record(null, req);
    refuse(res, 404, 'not_found', 'Not found', `No route ${req.method} ${req.path}.`);
  });

  const server = http.createServer(app);
  const ws = attachCartesiaWebSocket(server, {
    apiKey,
    models: MODELS,
    hasVoice: (id) => voices.has(id) || (CARTESIA_PRESET_VOICES as readonly string[]).includes(id),
    pcm: fakeSpeechPcm,
    wordTimes: fakeWordTimes,
  });
  const url = await listenOnLoopback(server);
  return {
    url,
    apiKey,
    requests,
    voices,
    fail(route, fault, times = 1) {
      faults[route].push({ fault, remaining: times });
    },
    requestsTo(route) {
      return requests.filter((r) => r.cartesiaRoute === route);
    },
    ws,
    close: () => {
      ws.close();
      return closeServer(server);
    },
  };
}
