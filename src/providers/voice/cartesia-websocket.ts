// Cartesia's WebSocket of text to speech: one connection per speech socket (src/voices/speech-socket.ts),
// opened as the socket opens, each utterance a context over it. Written from Cartesia's API reference:
//   https://docs.cartesia.ai/api-reference/tts/websocket                              (handshake, messages, multiplexing)
//   https://docs.cartesia.ai/use-the-api/tts-websocket/contexts                       (contexts, `continue`, expiry)
//   https://docs.cartesia.ai/use-the-api/tts-websocket/context-flushing-and-flush-i-ds (`flush`, flush_done)
//   https://docs.cartesia.ai/use-the-api/api-conventions                              (Bearer key, Cartesia-Version)
//   https://docs.cartesia.ai/use-the-api/concurrency-limits-and-timeouts              (idle connections closed after 5 minutes)
// and checked against the message types of Cartesia's JavaScript SDK (@cartesia/cartesia-js:
// WebsocketClientEvent, WebsocketResponse).
//
//   GET wss://<base>/tts/websocket     `Authorization: Bearer <key>`, `Cartesia-Version` (headers, as servers send them)
//   ->  {"context_id", "model_id", "voice": {"mode": "id", "id"}, "output_format": {"container": "raw",
//        "encoding": "pcm_s16le", "sample_rate"}, "language", "add_timestamps": true, "generation_config"?:
//        {"speed"}, "transcript", "continue": bool, "flush"?: true}     every input of a context repeats
//                                                                       all fields but transcript/continue/flush
//   ->  {"context_id", "cancel": true}                                  no more output for that context
//   <-  {"type": "chunk", "context_id", "data": "<base64 PCM>", "done", "status_code", "step_time", "flush_id"?}
//   <-  {"type": "timestamps", "context_id", "word_timestamps": {"words", "start", "end"}}  seconds from the context's start
//   <-  {"type": "flush_done", "context_id", "flush_id", ...}           (nothing to do here)
//   <-  {"type": "done", "context_id", "done": true}                    everything sent on the context is spoken
//   <-  {"type": "error", "context_id"?, "status_code", "title", "message", "error_code"?}
//
// Our `continue` is Cartesia's: the texts of one utterance are inputs of one context, with `continue: true`
// until the last (a text without it, or an empty transcript with `continue: false`). A text and the end given
// in the same turn go as one input. Cartesia expires a context a second after its last audio: a text that
// comes after the context has been quiet that long (ROTATE_QUIET_MS) goes to a fresh context, the old one
// ended first; the fresh context's audio is relayed after the old one's, in order.
//
// What was spoken is counted from the word timestamps (asked for on every context): each word is found in
// the text sent, and the characters up to its end are reported as spoken (`spoken_characters`); the rest of
// the text counts once the context is done. Refusals map as the HTTP adapter's (./cartesia-wire.ts): at the
// handshake its HTTP status (401/403: our credentials, an operator's problem), in an error message its
// status_code; a connection that breaks or closes fails every context still speaking (`unavailable`), and
// one that fails or is closed with none (refused ahead of any context, or closed by Cartesia while idle)
// fails nothing: it is no longer `usable`, and the socket's next context opens a new one. Messages
// are taken as the utterances take them: past QUEUED_MAX waiting for one context, the connection is paused
// (the contexts of one speech socket share its client, who is behind for all of them alike).
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { isJsonObject } from '../http-body.js';
import {
  CARTESIA_SAMPLE_RATE_HZ,
  CartesiaError,
  cartesiaRefusal,
  cartesiaSpeed,
  providerSaid,
  readWordTimestamps,
  saidOf,
} from './cartesia-wire.js';
import { Base64Samples } from './speech-pieces.js';
import {
  pcmBytes,
  shiftedWords,
  type ContextPcm,
  type ContextPiece,
  type ProviderContextConnection,
  type ProviderSpeechContext,
  type SpeechContextRequest,
  type WordTimestamps,
} from './types.js';

/** Pieces waiting in one context beyond which the connection is paused (and resumed below a quarter of it). */
const QUEUED_MAX = 64;
/** The largest message read from Cartesia (an audio chunk in base64 is far less). */
const MESSAGE_BYTES_MAX = 16 * 1024 * 1024;
/** The most of a refused handshake's body read. */
const HANDSHAKE_BODY_BYTES_MAX = 16 * 1024;
/** The handshake's time limit. */
const HANDSHAKE_TIMEOUT_MS = 10_000;
/** A context quiet this long after its audio is taken for expired (Cartesia: a second): more text goes to a fresh one. */
export const ROTATE_QUIET_MS = 700;
/** An old context ended for a fresh one finishes at its `done`, or after this long without a message (it had expired). */
const ENDED_WAIT_MS = 1_500;

export interface CartesiaSocketOptions {
  baseUrl: string;
  apiKey: string;
  version: string;
  language: string;
}

type Raw = ContextPcm | { words: WordTimestamps };

/** One Cartesia context: the pieces it received, queued until the utterance takes them. */
interface Segment {
  id: string;
  queue: Raw[];
  finished: boolean;
  /** An input went out for it (Cartesia knows it). */
  sent: boolean;
  /** Its end (`continue: false`) was sent. */
  ended: boolean;
  audio: boolean;
  last_audio_ms: number;
  samples: Base64Samples;
  timer: NodeJS.Timeout | null;
}

/** The connection: its contexts by Cartesia's context_id. */
export class CartesiaConnection implements ProviderContextConnection {
  private readonly ws: WebSocket;
  private readonly outbox: string[] = [];
  private readonly owners = new Map<string, CartesiaContext>();
  private failure: CartesiaError | null = null;
  private closed = false;
  private paused = false;
  readonly #apiKey: string;

  constructor(private readonly opts: CartesiaSocketOptions) {
    this.#apiKey = opts.apiKey;
    this.ws = new WebSocket(`${opts.baseUrl.replace(/^http/, 'ws')}/tts/websocket`, {
      headers: { authorization: `Bearer ${opts.apiKey}`, 'cartesia-version': opts.version, 'user-agent': 'video-voice-api' },
      maxPayload: MESSAGE_BYTES_MAX,
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
      followRedirects: false,
      perMessageDeflate: false,
    });
    this.ws.on('open', () => {
      for (const m of this.outbox.splice(0)) this.ws.send(m);
    });
    this.ws.on('unexpected-response', (_req, res) => {
      const status = res.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (d: Buffer) => {
        if (size < HANDSHAKE_BODY_BYTES_MAX) chunks.push(d);
        size += d.length;
      });
      const refused = () => {
        const body = Buffer.concat(chunks).subarray(0, HANDSHAKE_BODY_BYTES_MAX);
        const retryAfter = res.headers['retry-after'];
        this.fail(cartesiaRefusal('speech', status, providerSaid(body), typeof retryAfter === 'string' ? retryAfter : null, this.scrub));
        this.ws.terminate();
      };
      res.on('end', refused);
      res.on('error', refused);
    });
    this.ws.on('message', (data) => this.onMessage(data.toString()));
    this.ws.on('close', (code, reason) => {
      if (this.closed) return;
      const why = this.scrub(reason.toString()) || `code ${code}`;
      this.fail(new CartesiaError(code === 1008 ? 'rejected' : 'unavailable', `Cartesia closed the text to speech connection: ${why}`));
    });
    this.ws.on('error', (err) =>
      this.fail(new CartesiaError('unavailable', this.scrub(`Cartesia could not be reached for text to speech: ${err.message}`))),
    );
  }

  private readonly scrub = (s: string): string => s.split(this.#apiKey).join('[redacted]');

  /** Not once it failed or was closed, nor while Cartesia closes it (it closes idle connections: a close frame came). */
  get usable(): boolean {
    const state = this.ws.readyState;
    return this.failure === null && !this.closed && (state === WebSocket.CONNECTING || state === WebSocket.OPEN);
  }

  openContext(req: SpeechContextRequest): ProviderSpeechContext {
    if (!this.usable) throw new Error('invariant: a context opened on a connection that ended');
    return new CartesiaContext(this, req, this.opts.language).handle();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const c of new Set(this.owners.values())) c.fail(new CartesiaError('unavailable', 'the text to speech connection was closed'));
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(1000);
    else if (this.ws.readyState === WebSocket.CONNECTING) this.ws.terminate();
  }

  own(id: string, c: CartesiaContext): void {
    this.owners.set(id, c);
  }

  forget(id: string): void {
    this.owners.delete(id);
    this.flow();
  }

  send(m: object): void {
    if (!this.usable) return;
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(m));
    else this.outbox.push(JSON.stringify(m));
  }

  /** Pauses the connection while a context has too much waiting; resumes once every one is below a quarter of it. */
  flow(): void {
    let most = 0;
    for (const c of new Set(this.owners.values())) most = Math.max(most, c.queued);
    if (!this.paused && most > QUEUED_MAX) {
      this.paused = true;
      this.ws.pause();
    } else if (this.paused && most < QUEUED_MAX / 4) {
      this.paused = false;
      this.ws.resume();
    }
  }

  private fail(err: CartesiaError): void {
    if (this.failure || this.closed) return;
    this.failure = err;
    for (const c of new Set(this.owners.values())) c.fail(err);
    this.owners.clear();
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.terminate();
  }

  private onMessage(text: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return this.fail(new CartesiaError('unavailable', 'Cartesia sent a text to speech message that is not JSON'));
    }
    if (!isJsonObject(msg))
      return this.fail(new CartesiaError('unavailable', 'Cartesia sent a text to speech message that is not an object'));
    const id = typeof msg['context_id'] === 'string' ? msg['context_id'] : null;
    if (id === null) {
      // An error about no context is about the connection: every context fails.
      if (msg['type'] === 'error') this.fail(this.refusal(msg));
      return;
    }
    // A context cancelled or finished here is forgotten: what still comes for it is dropped.
    this.owners.get(id)?.onMessage(id, msg);
  }

  refusal(msg: Record<string, unknown>): CartesiaError {
    const status = typeof msg['status_code'] === 'number' ? msg['status_code'] : 500;
    return cartesiaRefusal('speech', status, saidOf(msg), null, this.scrub);
  }
}

/** One utterance: a Cartesia context (or, past an expiry, several in a row). */
class CartesiaContext {
  private readonly base = randomUUID();
  private readonly segments: Segment[] = [];
  private pending: { transcript: string; flush: boolean } | null = null;
  /** Everything sent, and how far the word timestamps have reached into it (UTF-16 index). */
  private text = '';
  private cursor = 0;
  private ended = false;
  private cancelled = false;
  private failure: CartesiaError | null = null;
  private wake: (() => void) | null = null;

  constructor(
    private readonly conn: CartesiaConnection,
    private readonly req: SpeechContextRequest,
    private readonly language: string,
  ) {
    this.segments.push(this.segment());
  }

  private segment(): Segment {
    const id = this.segments.length === 0 ? this.base : `${this.base}.${this.segments.length + 1}`;
    this.conn.own(id, this);
    return {
      id,
      queue: [],
      finished: false,
      sent: false,
      ended: false,
      audio: false,
      last_audio_ms: 0,
      samples: new Base64Samples(),
      timer: null,
    };
  }

  private get current(): Segment {
    return this.segments.at(-1)!;
  }

  get queued(): number {
    return this.segments.reduce((n, s) => n + s.queue.length, 0);
  }

  private poke(): void {
    this.wake?.();
    this.wake = null;
  }

  /** An input of the context, with the fields every input repeats. */
  private input(id: string, transcript: string, more: boolean, flush: boolean): object {
    const speed = cartesiaSpeed(this.req.speed);
    return {
      context_id: id,
      model_id: this.req.model,
      voice: { mode: 'id', id: this.req.voice_id },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: CARTESIA_SAMPLE_RATE_HZ },
      language: this.language,
      add_timestamps: true,
      ...(speed !== undefined ? { generation_config: { speed } } : {}),
      transcript,
      continue: more,
      ...(flush ? { flush: true } : {}),
    };
  }

  /** The text in hand goes out (after the turn that gave it, so a text and its end go as one input). */
  private sendPending(): void {
    const p = this.pending;
    if (!p || this.cancelled || this.failure) return;
    this.pending = null;
    const seg = this.current;
    if (this.ended) seg.ended = true;
    seg.sent = true;
    this.conn.send(this.input(seg.id, p.transcript, !this.ended, p.flush && !this.ended));
  }

  /** A context quiet past its audio may have expired: it is ended, and what comes next goes to a fresh one. */
  private rotateIfQuiet(): void {
    const seg = this.current;
    const quiet = seg.audio && performance.now() - seg.last_audio_ms >= ROTATE_QUIET_MS;
    if (!seg.finished && !quiet) return;
    if (!seg.finished) {
      seg.ended = true;
      this.conn.send(this.input(seg.id, '', false, false));
      this.awaitEnd(seg);
    }
    this.segments.push(this.segment());
  }

  /** An old context finishes at its done, or once nothing came for it for ENDED_WAIT_MS. */
  private awaitEnd(seg: Segment): void {
    if (seg.timer) clearTimeout(seg.timer);
    seg.timer = setTimeout(() => this.finish(seg), ENDED_WAIT_MS);
  }

  private finish(seg: Segment): void {
    if (seg.timer) clearTimeout(seg.timer);
    seg.timer = null;
    seg.finished = true;
    this.conn.forget(seg.id);
    this.poke();
  }

  onMessage(id: string, msg: Record<string, unknown>): void {
    const seg = this.segments.find((s) => s.id === id);
    if (!seg || seg.finished || this.cancelled) return;
    const old = seg !== this.current;
    if (old) this.awaitEnd(seg);
    switch (msg['type']) {
      case 'chunk': {
        if (typeof msg['data'] === 'string' && msg['data'].length > 0) this.onAudio(seg, msg['data']);
        break;
      }
      case 'timestamps': {
        const w = readWordTimestamps(msg['word_timestamps']);
        if (w) seg.queue.push({ words: w });
        break;
      }
      case 'done':
        return this.finish(seg);
      case 'error':
        // An old context ended for a fresh one may have expired: its error ends it, nothing lost.
        if (old) return this.finish(seg);
        return this.fail(this.conn.refusal(msg));
      default:
        return;
    }
    this.conn.flow();
    this.poke();
  }

  /** Whole samples only (a sample may straddle two messages). */
  private onAudio(seg: Segment, base64: string): void {
    const pcm = seg.samples.next(base64);
    seg.audio = true;
    seg.last_audio_ms = performance.now();
    if (pcm) seg.queue.push(pcm);
  }

  fail(err: CartesiaError): void {
    if (this.failure || this.cancelled) return;
    this.failure = err;
    this.forgetAll();
    this.poke();
  }

  private forgetAll(): void {
    for (const s of this.segments) {
      if (s.timer) clearTimeout(s.timer);
      s.timer = null;
      this.conn.forget(s.id);
    }
  }

  /** The characters spoken once `word` was: it is looked for in the text sent, from where the last word ended. */
  private spokenThrough(word: string): void {
    const at = this.text.indexOf(word, this.cursor);
    if (at >= 0 && /^[\s\p{P}]*$/u.test(this.text.slice(this.cursor, at))) {
      this.cursor = at + word.length;
      return;
    }
    // Said otherwise than written (a number read out, say): the next written word is taken as spoken.
    const next = /^\s*\S+/u.exec(this.text.slice(this.cursor));
    if (next) this.cursor += next[0].length;
  }

  private async *pieces(): AsyncGenerator<ContextPiece> {
    let audio_bytes = 0;
    let reported = 0;
    try {
      for (let i = 0; ;) {
        if (this.cancelled) return;
        const seg = this.segments[i]!;
        const start_s = audio_bytes / 2 / CARTESIA_SAMPLE_RATE_HZ;
        for (;;) {
          if (this.cancelled) return;
          const raw = seg.queue.shift();
          if (raw) {
            this.conn.flow();
            if (!('words' in raw)) {
              audio_bytes += pcmBytes(raw);
              yield raw;
              continue;
            }
            for (const w of raw.words.words) this.spokenThrough(w);
            const spoken = [...this.text.slice(0, this.cursor)].length;
            if (spoken > reported) {
              reported = spoken;
              yield { spoken_characters: spoken };
            }
            yield { words: shiftedWords(raw.words, start_s) };
            continue;
          }
          if (this.failure) throw this.failure;
          if (seg.finished) break;
          await new Promise<void>((r) => (this.wake = r));
        }
        if (i + 1 < this.segments.length) {
          i++;
          continue;
        }
        if (this.ended && !this.pending) return;
        // Finished before the utterance's text ended (expired): the next text opens a fresh context.
        await new Promise<void>((r) => (this.wake = r));
        if (this.failure) throw this.failure;
      }
    } finally {
      this.forgetAll();
    }
  }

  handle(): ProviderSpeechContext {
    return {
      send: (text, flush) => {
        if (this.ended) throw new Error('invariant: text sent to an utterance that ended');
        if (this.cancelled || this.failure) return;
        if (!this.pending) {
          this.rotateIfQuiet();
          this.pending = { transcript: '', flush: false };
          queueMicrotask(() => this.sendPending());
        }
        this.pending.transcript += text;
        this.pending.flush ||= flush;
        this.text += text;
      },
      end: () => {
        if (this.ended) return;
        this.ended = true;
        if (this.pending || this.cancelled || this.failure) return;
        const seg = this.current;
        if (seg.finished) return this.poke();
        seg.ended = true;
        this.conn.send(this.input(seg.id, '', false, false));
      },
      cancel: () => {
        if (this.cancelled) return;
        this.cancelled = true;
        this.pending = null;
        for (const s of this.segments) if (s.sent && !s.finished) this.conn.send({ context_id: s.id, cancel: true });
        this.forgetAll();
        this.poke();
      },
      pieces: this.pieces(),
    };
  }
}
