// The Cartesia fake's WebSocket of text to speech, on the fake's HTTP server, as Cartesia's reference documents it:
//   https://docs.cartesia.ai/api-reference/tts/websocket                              (handshake, messages, multiplexing)
//   https://docs.cartesia.ai/use-the-api/tts-websocket/contexts                       (contexts, `continue`, expiry)
//   https://docs.cartesia.ai/use-the-api/tts-websocket/context-flushing-and-flush-i-ds (`flush`, flush_id, flush_done)
//   https://docs.cartesia.ai/use-the-api/tts-websocket/buffering                       (max_buffer_delay_ms)
//   https://docs.cartesia.ai/use-the-api/api-conventions                              (Bearer key or ?api_key, Cartesia-Version or ?cartesia_version)
//   https://docs.cartesia.ai/use-the-api/concurrency-limits-and-timeouts              (idle connections closed after 5 minutes)
// with the message shapes of Cartesia's JavaScript SDK (@cartesia/cartesia-js: WebsocketClientEvent, WebsocketResponse).
//
//   GET /tts/websocket   upgraded; `Authorization: Bearer <key>` (or ?api_key=) and `Cartesia-Version` (or
//                        ?cartesia_version=, which wins). Refused at the handshake with the JSON error object:
//                        401 a missing or wrong key, 400 a missing or malformed version.
//   client  {"context_id", "model_id", "voice": "<id>" | {"id", ...}, "output_format": {"container": "raw",
//           "encoding": "pcm_s16le", "sample_rate"}, "transcript", "continue"?, "flush"?, "add_timestamps"?,
//           "language"?, "generation_config"?, "max_buffer_delay_ms"?}     a context's input
//           {"context_id", "cancel": true}                                 no more output for the context
//   server  {"type": "chunk", "context_id", "data", "done": false, "status_code": 206, "step_time", "flush_id"}
//           {"type": "timestamps", "context_id", "word_timestamps": {"words", "start", "end"}, "done": false, ...}
//           {"type": "flush_done", "context_id", "flush_id", "flush_done": true, "done": false, "status_code": 206}
//           {"type": "done", "context_id", "done": true, "status_code": 200}
//           {"type": "error", "context_id", "status_code", "title", "message", "error_code", "done": true}
//
// A context's inputs keep every field but transcript, continue and flush the same (else a 400 error for it);
// an unknown voice is a 404 error, an unknown model or output format a 400, a missing field a 422. Text is
// buffered until it ends a sentence, a flush, the last input (`continue` false) or max_buffer_delay_ms
// (default 3000) after it came; each generation is then spoken in order, AUDIO_CHARS_PER_CHUNK characters of
// the REST fake's PCM (fakeSpeechPcm: 50 ms a character) per chunk, with the timestamps of the words those
// chunks completed (times from the context's start). A context expires a second after its last audio once it
// has nothing left to speak, and when done: an input for it then is a 400 error. A handshake may be made to
// take a while (`handshakeDelayMs`), as one over the internet does. A connection with nothing
// sent or received for `idleTimeoutMs` (Cartesia: 5 minutes) is closed (code 1000: the docs name none), its
// close handshake made to take `idleCloseLingerMs` if asked.
// Tests read every connection (`connections`, each context's characters spoken; `handshakes` asked for,
// whatever their answer) and script faults: every handshake refused (`refusing`) or reset (`unreachable`)
// while set, the next connection closed with 1011 after some chunks (`cutAfterChunks`), the next context
// answered with an error message (`errorNext`).
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { WebSocketServer, type WebSocket } from 'ws';

export const AUDIO_CHARS_PER_CHUNK = 20;
const DEFAULT_BUFFER_DELAY_MS = 3_000;
const EXPIRY_MS = 1_000;
const IDLE_TIMEOUT_MS = 5 * 60_000;
const RATES = [8000, 16000, 22050, 24000, 44100, 48000];

export interface FakeCartesiaContext {
  id: string;
  /** Every transcript received for it, joined. */
  transcript: string;
  characters_spoken: number;
  done: boolean;
  cancelled: boolean;
}

export interface CartesiaWsConnection {
  headers: http.IncomingHttpHeaders;
  query: Record<string, string>;
  /** Every message received, parsed. */
  messages: Record<string, unknown>[];
  contexts: Map<string, FakeCartesiaContext>;
  /** The fake sent its close for the connection's idleness (its close handshake may still be under way). */
  idle_closed: boolean;
  closed: boolean;
  /** Bytes sent but not yet taken by the client (it stopped reading). */
  buffered_bytes(): number;
}

export interface CartesiaWsOptions {
  apiKey: string;
  models: readonly string[];
  hasVoice(voice_id: string): boolean;
  pcm(voice_id: string, text: string, rateHz: number): Buffer;
  wordTimes(text: string): { words: string[]; start: number[]; end: number[] };
}

export interface CartesiaWsFake {
  connections: CartesiaWsConnection[];
  /** Handshakes asked for at /tts/websocket, refused or reset ones too. */
  handshakes: number;
  /** Wait before a handshake is accepted (Cartesia's, over the internet: TLS and the upgrade). */
  handshakeDelayMs: number;
  /** Wait before each generation's first audio (a provider's time to first byte). */
  firstAudioDelayMs: number;
  chunkIntervalMs: number;
  /** While set, every handshake is refused so (our key refused: every connection is). */
  refusing: { status: number; error_code: string; message: string } | null;
  /** While set, every handshake's TCP connection is reset (Cartesia unreachable). */
  unreachable: boolean;
  /** A connection quiet this long each way is closed by the fake. */
  idleTimeoutMs: number;
  /** How long the close handshake of an idle connection takes (the fake reads the client's close frame that late). */
  idleCloseLingerMs: number;
  cutAfterChunks: number | null;
  errorNext: { status_code: number; error_code: string; message: string } | null;
  /** Characters spoken over every connection. */
  charactersSpoken(): number;
  close(): void;
}

const errorObject = (status_code: number, error_code: string, message: string) => ({
  error_code,
  title: message.split('.')[0],
  message,
  request_id: randomUUID(),
  doc_url: 'https://docs.cartesia.ai/use-the-api/api-errors',
  status_code,
});

export function attachCartesiaWebSocket(server: http.Server, opts: CartesiaWsOptions): CartesiaWsFake {
  const wss = new WebSocketServer({ noServer: true });
  const sockets = new Set<WebSocket>();
  const fake: CartesiaWsFake = {
    connections: [],
    handshakes: 0,
    handshakeDelayMs: 0,
    firstAudioDelayMs: 0,
    chunkIntervalMs: 2,
    refusing: null,
    unreachable: false,
    idleTimeoutMs: IDLE_TIMEOUT_MS,
    idleCloseLingerMs: 0,
    cutAfterChunks: null,
    errorNext: null,
    charactersSpoken: () => fake.connections.reduce((n, c) => n + [...c.contexts.values()].reduce((m, x) => m + x.characters_spoken, 0), 0),
    close: () => {
      for (const s of sockets) s.terminate();
      wss.close();
    },
  };
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const answer = (status: number, body: object) => {
      const text = JSON.stringify(body);
      socket.end(
        `HTTP/1.1 ${status} Refused\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
      );
    };
    if (url.pathname !== '/tts/websocket') return answer(404, errorObject(404, 'not_found', `No route GET ${url.pathname}.`));
    fake.handshakes++;
    if (fake.unreachable) return socket.destroy();
    if (fake.refusing) {
      const r = fake.refusing;
      return answer(r.status, errorObject(r.status, r.error_code, r.message));
    }
    const key = url.searchParams.get('api_key') ?? req.headers.authorization?.replace(/^Bearer /, '');
    if (key !== opts.apiKey) return answer(401, errorObject(401, 'unauthorized', key ? 'Invalid API key.' : 'Missing API key.'));
    const version = url.searchParams.get('cartesia_version') ?? req.headers['cartesia-version'];
    if (typeof version !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(version)) {
      return answer(400, errorObject(400, 'invalid_request', 'The Cartesia-Version header is required (a date such as 2026-03-01).'));
    }
    const upgrade = () =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        sockets.add(ws);
        const c: CartesiaWsConnection = {
          headers: req.headers,
          query: Object.fromEntries(url.searchParams),
          messages: [],
          contexts: new Map(),
          idle_closed: false,
          closed: false,
          buffered_bytes: () => ws.bufferedAmount,
        };
        fake.connections.push(c);
        const cutAfter = fake.cutAfterChunks;
        fake.cutAfterChunks = null;
        ws.on('close', () => {
          c.closed = true;
          sockets.delete(ws);
        });
        serve(ws, c, opts, fake, cutAfter);
      });
    if (fake.handshakeDelayMs > 0) setTimeout(upgrade, fake.handshakeDelayMs);
    else upgrade();
  });
  return fake;
}

interface State {
  ctx: FakeCartesiaContext;
  /** The fields every input must repeat, as the first input gave them. */
  fixed: string;
  voice_id: string;
  rate: number;
  timestamps: boolean;
  buffer: string;
  bufferTimer: NodeJS.Timeout | null;
  bufferDelayMs: number;
  flush_id: number;
  /** Text spoken so far (all generations), and how many of its words were timed. */
  spoken: string;
  wordsSent: number;
  audio_s: number;
  work: Promise<void>;
  busy: number;
  last_audio_ms: number;
}

function serve(ws: WebSocket, c: CartesiaWsConnection, opts: CartesiaWsOptions, fake: CartesiaWsFake, cutAfter: number | null): void {
  const states = new Map<string, State>();
  let chunks = 0;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  let idle: NodeJS.Timeout | null = null;
  /** Anything sent or received: the idle connection's close is put off. */
  const active = () => {
    if (idle) clearTimeout(idle);
    idle = setTimeout(() => {
      c.idle_closed = true;
      ws.close(1000, 'idle timeout');
      if (fake.idleCloseLingerMs <= 0) return;
      // The client's answering close frame left unread a while: the close handshake takes that long.
      const raw = (ws as unknown as { _socket: Duplex })._socket;
      raw.pause();
      setTimeout(() => raw.resume(), fake.idleCloseLingerMs).unref();
    }, fake.idleTimeoutMs).unref();
  };
  active();
  ws.on('close', () => {
    if (idle) clearTimeout(idle);
  });
  const send = (m: object) => {
    if (ws.readyState !== ws.OPEN) return;
    active();
    ws.send(JSON.stringify(m));
  };
  const error = (context_id: string | null, status_code: number, error_code: string, message: string) =>
    send({ type: 'error', ...(context_id ? { context_id } : {}), done: true, ...errorObject(status_code, error_code, message) });

  /** The words of the spoken text ended by now (followed by white space, or the context's last). */
  const timestamps = (s: State, final: boolean) => {
    if (!s.timestamps) return;
    const t = opts.wordTimes(s.spoken);
    const complete = final || /\s$/u.test(s.spoken) ? t.words.length : t.words.length - 1;
    const upto = Math.min(complete, t.end.filter((e) => e <= s.audio_s + 1e-9).length);
    if (upto <= s.wordsSent) return;
    const slice = <T>(a: T[]) => a.slice(s.wordsSent, upto);
    send({
      type: 'timestamps',
      context_id: s.ctx.id,
      done: false,
      status_code: 206,
      flush_id: s.flush_id,
      word_timestamps: { words: slice(t.words), start: slice(t.start), end: slice(t.end) },
    });
    s.wordsSent = upto;
  };

  const generate = (s: State, flushed: boolean, final: boolean) => {
    if (s.bufferTimer) clearTimeout(s.bufferTimer);
    s.bufferTimer = null;
    const text = s.buffer;
    s.buffer = '';
    const flush_id = s.flush_id;
    if (flushed) s.flush_id++;
    s.busy++;
    s.work = s.work.then(async () => {
      try {
        const chars = [...text];
        if (chars.length > 0) await sleep(fake.firstAudioDelayMs);
        for (let i = 0; i < chars.length; i += AUDIO_CHARS_PER_CHUNK) {
          if (i > 0) await sleep(fake.chunkIntervalMs);
          if (ws.readyState !== ws.OPEN || s.ctx.cancelled) return;
          const part = chars.slice(i, i + AUDIO_CHARS_PER_CHUNK).join('');
          send({
            type: 'chunk',
            context_id: s.ctx.id,
            data: opts.pcm(s.voice_id, part, s.rate).toString('base64'),
            done: false,
            status_code: 206,
            step_time: 1,
            flush_id,
          });
          s.last_audio_ms = performance.now();
          s.ctx.characters_spoken += [...part].length;
          s.spoken += part;
          s.audio_s += [...part].length * 0.05;
          timestamps(s, final && i + AUDIO_CHARS_PER_CHUNK >= chars.length);
          if (cutAfter !== null && ++chunks >= cutAfter) return void ws.close(1011, 'internal error');
        }
        if (ws.readyState !== ws.OPEN || s.ctx.cancelled) return;
        if (flushed) send({ type: 'flush_done', context_id: s.ctx.id, flush_id, flush_done: true, done: false, status_code: 206 });
        if (final) {
          timestamps(s, true);
          s.ctx.done = true;
          send({ type: 'done', context_id: s.ctx.id, done: true, status_code: 200 });
        }
      } finally {
        s.busy--;
      }
    });
  };

  ws.on('message', (data) => {
    active();
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(data.toString()) as Record<string, unknown>;
    } catch {
      return error(null, 400, 'invalid_request', 'The message is not JSON.');
    }
    c.messages.push(msg);
    const id = msg['context_id'];
    if (typeof id !== 'string' || id.length === 0) return error(null, 422, 'validation_error', 'context_id: Field required');
    if (msg['cancel'] === true) {
      const s = states.get(id);
      if (s) {
        s.ctx.cancelled = true;
        if (s.bufferTimer) clearTimeout(s.bufferTimer);
      }
      return;
    }
    for (const k of ['model_id', 'transcript', 'voice', 'output_format']) {
      if (msg[k] === undefined) return error(id, 422, 'validation_error', `${k}: Field required`);
    }
    if (typeof msg['transcript'] !== 'string' || typeof msg['model_id'] !== 'string') {
      return error(id, 422, 'validation_error', 'transcript and model_id must be strings');
    }
    const v = msg['voice'];
    const voice_id = typeof v === 'string' ? v : typeof v === 'object' && v !== null ? (v as Record<string, unknown>)['id'] : undefined;
    if (typeof voice_id !== 'string') return error(id, 422, 'validation_error', 'voice.id: Field required');
    const f = msg['output_format'] as Record<string, unknown>;
    const fixed = JSON.stringify([msg['model_id'], voice_id, f, msg['language'], msg['add_timestamps'], msg['generation_config']]);
    let s = states.get(id);
    if (s) {
      if (s.ctx.cancelled) return;
      const expired = s.busy === 0 && s.buffer === '' && s.last_audio_ms > 0 && performance.now() - s.last_audio_ms > EXPIRY_MS;
      if (s.ctx.done || expired) return error(id, 400, 'context_expired', `Context ${id} has expired; use a new context_id.`);
      if (fixed !== s.fixed) {
        return error(id, 400, 'invalid_request', 'Inputs on a context must keep every field but transcript, continue and flush the same.');
      }
    } else {
      if (fake.errorNext) {
        const e = fake.errorNext;
        fake.errorNext = null;
        return error(id, e.status_code, e.error_code, e.message);
      }
      if (!opts.models.includes(msg['model_id'])) return error(id, 400, 'invalid_model', `Model ${msg['model_id']} does not exist.`);
      if (f?.['container'] !== 'raw' || f['encoding'] !== 'pcm_s16le' || !RATES.includes(f['sample_rate'] as number)) {
        return error(id, 400, 'invalid_output_format', 'output_format is not supported here.');
      }
      if (!opts.hasVoice(voice_id)) return error(id, 404, 'voice_not_found', `Voice ${voice_id} not found.`);
      const ctx: FakeCartesiaContext = { id, transcript: '', characters_spoken: 0, done: false, cancelled: false };
      c.contexts.set(id, ctx);
      s = {
        ctx,
        fixed,
        voice_id,
        rate: f['sample_rate'] as number,
        timestamps: msg['add_timestamps'] === true,
        buffer: '',
        bufferTimer: null,
        bufferDelayMs: typeof msg['max_buffer_delay_ms'] === 'number' ? msg['max_buffer_delay_ms'] : DEFAULT_BUFFER_DELAY_MS,
        flush_id: 1,
        spoken: '',
        wordsSent: 0,
        audio_s: 0,
        work: Promise.resolve(),
        busy: 0,
        last_audio_ms: 0,
      };
      states.set(id, s);
    }
    const st = s;
    st.ctx.transcript += msg['transcript'];
    st.buffer += msg['transcript'];
    const more = msg['continue'] === true;
    const flush = msg['flush'] === true;
    if (!more || flush || /[.!?]\s*$/u.test(st.buffer)) return generate(st, flush, !more);
    if (st.buffer !== '' && !st.bufferTimer) st.bufferTimer = setTimeout(() => generate(st, false, false), st.bufferDelayMs);
  });
}
