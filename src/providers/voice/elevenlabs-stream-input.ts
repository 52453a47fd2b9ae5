// ElevenLabs' WebSocket of text to speech from partial input, as https://elevenlabs.io/docs/api-reference/websocket
// documents it: one utterance of a speech WebSocket context (src/voices/speech-contexts.ts) per connection.
//
//   GET wss://<base>/v1/text-to-speech/{voice_id}/stream-input?model_id=...&output_format=pcm_22050&sync_alignment=true
//       `xi-api-key` header
//   ->  {"text": " "}                           opens the stream
//   ->  {"text": "...", "flush"?: true}         text to speak; `flush` speaks what is buffered now
//   ->  {"text": ""}                            end of input
//   <-  {"audio": "<base64 PCM>", "alignment": {"chars", "charStartTimesMs", "charsDurationsMs"}, ...}
//   <-  {"isFinal": true}                       all of it spoken (the server closes)
//
// The alignment's characters are what was spoken (a running count, reported as `spoken_characters`),
// and grouped into words at white space, timed from the start of the utterance's audio (the alignment's
// milliseconds count from the start of their chunk). A connection refused at the handshake is the REST
// API's error (401/403: our credentials); one closed without isFinal, or an `error` message, is
// `unavailable` (or `rejected` for a policy close: a voice, format or text it refuses). Messages are read
// only as fast as the utterance takes them: past QUEUED_MAX waiting, the socket is paused.
import WebSocket from 'ws';
import { pcmBytes, type ContextPiece, type ProviderSpeechContext, type SpeechContextRequest } from './types.js';
import { Base64Samples, CharacterWords } from './speech-pieces.js';
import { ElevenLabsError, ELEVENLABS_OUTPUT_FORMAT, ELEVENLABS_SAMPLE_RATE_HZ } from './elevenlabs-wire.js';

/** Pieces waiting to be taken beyond which the provider's socket is paused (and resumed below a quarter of it). */
const QUEUED_MAX = 64;
/** The largest message read from ElevenLabs (an audio chunk in base64 is far less). */
const MESSAGE_BYTES_MAX = 16 * 1024 * 1024;
/** Seconds ElevenLabs keeps the connection without text (its inactivity_timeout; our sockets' idle limit ends them sooner). */
const INACTIVITY_TIMEOUT_S = 180;

interface Alignment {
  chars?: unknown;
  charStartTimesMs?: unknown;
  charsDurationsMs?: unknown;
  charDurationsMs?: unknown;
}

/** The alignment's characters with their start and end, in seconds from the utterance's start (its times count from its chunk's start). */
function alignedCharacters(a: Alignment, offset_s: number): { chars: string[]; starts: number[]; ends: number[] } {
  const chars = Array.isArray(a.chars) ? (a.chars as unknown[]).map(String) : [];
  const starts = Array.isArray(a.charStartTimesMs) ? (a.charStartTimesMs as unknown[]) : [];
  const durations = (
    Array.isArray(a.charsDurationsMs) ? a.charsDurationsMs : Array.isArray(a.charDurationsMs) ? a.charDurationsMs : []
  ) as unknown[];
  const start_s = chars.map((_, i) => offset_s + Number(starts[i] ?? 0) / 1000);
  return { chars, starts: start_s, ends: start_s.map((s, i) => s + Number(durations[i] ?? 0) / 1000) };
}

type Queued = ContextPiece | { end: true } | { failure: ElevenLabsError };

const handshakeFailure = (status: number) =>
  status === 401 || status === 403
    ? new ElevenLabsError(
        'unavailable',
        `the voice provider refused the service's credentials (HTTP ${status}); an operator must check ELEVENLABS_API_KEY`,
        { status },
        'credentials',
      )
    : new ElevenLabsError(
        status >= 400 && status < 500 && status !== 429 ? 'rejected' : 'unavailable',
        `ElevenLabs refused the stream-input handshake (HTTP ${status})`,
        { status },
      );

/** One stream-input connection: what it received, queued until the utterance takes it. */
class StreamInput {
  private readonly ws: WebSocket;
  private readonly queue: Queued[] = [];
  private wake: (() => void) | null = null;
  private paused = false;
  private readonly outbox: string[] = [JSON.stringify({ text: ' ' })];
  private spoken = 0;
  private audio_bytes = 0;
  private readonly samples = new Base64Samples();
  private readonly words = new CharacterWords();
  ended = false;
  cancelled = false;

  constructor(private readonly opts: { baseUrl: string; apiKey: string; modelId: string; req: SpeechContextRequest }) {
    const query = new URLSearchParams({
      model_id: opts.modelId,
      output_format: ELEVENLABS_OUTPUT_FORMAT,
      sync_alignment: 'true',
      inactivity_timeout: String(INACTIVITY_TIMEOUT_S),
    });
    const url = `${opts.baseUrl.replace(/^http/, 'ws')}/v1/text-to-speech/${encodeURIComponent(opts.req.voice_id)}/stream-input?${query}`;
    this.ws = new WebSocket(url, {
      headers: { 'xi-api-key': opts.apiKey, 'user-agent': 'video-voice-api' },
      maxPayload: MESSAGE_BYTES_MAX,
      followRedirects: false,
      perMessageDeflate: false,
    });
    this.ws.on('open', () => {
      for (const m of this.outbox.splice(0)) this.ws.send(m);
    });
    this.ws.on('unexpected-response', (_req, res) => {
      res.resume();
      this.push({ failure: handshakeFailure(res.statusCode ?? 0) });
      this.ws.terminate();
    });
    this.ws.on('message', (data) => this.onMessage(data.toString()));
    this.ws.on('close', (code, reason) => {
      if (this.cancelled) return this.push({ end: true });
      const why = this.scrub(reason.toString()) || `code ${code}`;
      // After isFinal the end is already queued; a close without it broke the utterance off.
      this.push({ failure: new ElevenLabsError(code === 1008 ? 'rejected' : 'unavailable', `ElevenLabs closed the stream: ${why}`) });
    });
    this.ws.on('error', (err) =>
      this.push({ failure: new ElevenLabsError('unavailable', this.scrub(`ElevenLabs stream-input failed: ${err.message}`)) }),
    );
  }

  private scrub(s: string): string {
    return s.split(this.opts.apiKey).join('[redacted]');
  }

  push(p: Queued): void {
    this.queue.push(p);
    if (!this.paused && this.queue.length > QUEUED_MAX) {
      this.paused = true;
      this.ws.pause();
    }
    this.wake?.();
    this.wake = null;
  }

  send(m: object): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(m));
    else this.outbox.push(JSON.stringify(m));
  }

  terminate(): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.terminate();
  }

  private onMessage(text: string): void {
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return this.push({ failure: new ElevenLabsError('unavailable', 'ElevenLabs sent a stream-input message that is not JSON') });
    }
    if (typeof msg['error'] === 'string' || (typeof msg['message'] === 'string' && msg['audio'] === undefined)) {
      const said = this.scrub(String(msg['message'] ?? msg['error']));
      return this.push({ failure: new ElevenLabsError('unavailable', `ElevenLabs failed the stream: ${said}`) });
    }
    if (typeof msg['audio'] === 'string' && msg['audio'].length > 0) {
      this.onAudio(msg['audio'], (msg['alignment'] ?? msg['normalizedAlignment']) as Alignment | null | undefined);
    }
    if (msg['isFinal'] === true) {
      const w = this.words.end(this.audio_bytes / 2 / ELEVENLABS_SAMPLE_RATE_HZ);
      if (w) this.push({ words: w });
      this.push({ end: true });
    }
  }

  /** Whole samples only (a sample may straddle two messages); the alignment's characters counted as spoken. */
  private onAudio(base64: string, alignment: Alignment | null | undefined): void {
    const offset_s = this.audio_bytes / 2 / ELEVENLABS_SAMPLE_RATE_HZ;
    const pcm = this.samples.next(base64);
    if (pcm) this.audio_bytes += pcmBytes(pcm);
    if (alignment && Array.isArray(alignment.chars)) {
      this.spoken += alignment.chars.length;
      this.push({ spoken_characters: this.spoken });
    }
    if (pcm) this.push(pcm);
    if (alignment) {
      const a = alignedCharacters(alignment, offset_s);
      const w = this.words.push(a.chars, a.starts, a.ends, this.audio_bytes / 2 / ELEVENLABS_SAMPLE_RATE_HZ);
      if (w) this.push({ words: w });
    }
  }

  /** What was received, in order, taken as the utterance goes; a paused socket resumes once the queue drained. */
  async *pieces(): AsyncGenerator<ContextPiece> {
    try {
      for (;;) {
        while (this.queue.length === 0) await new Promise<void>((r) => (this.wake = r));
        const p = this.queue.shift()!;
        if (this.paused && this.queue.length < QUEUED_MAX / 4) {
          this.paused = false;
          this.ws.resume();
        }
        if ('end' in p) return;
        if ('failure' in p) throw p.failure;
        yield p;
      }
    } finally {
      this.terminate();
    }
  }
}

export function streamInputContext(opts: {
  baseUrl: string;
  apiKey: string;
  modelId: string;
  req: SpeechContextRequest;
}): ProviderSpeechContext {
  const s = new StreamInput(opts);
  return {
    send(text, flush) {
      if (s.ended) throw new Error('invariant: text sent to an utterance that ended');
      // An empty text is ElevenLabs' end of input: a flush alone sends a space.
      s.send({ text: text === '' ? ' ' : text, ...(flush ? { flush: true } : {}) });
    },
    end() {
      if (s.ended) return;
      s.ended = true;
      s.send({ text: '' });
    },
    cancel() {
      s.cancelled = true;
      s.terminate();
      s.push({ end: true });
    },
    pieces: s.pieces(),
  };
}
