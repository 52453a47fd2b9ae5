// The ElevenLabs fake's WebSocket: text to speech from partial text input, as
// https://elevenlabs.io/docs/api-reference/websocket documents it (the "stream-input" handshake and its
// messages), on the fake's HTTP server:
//
//   GET /v1/text-to-speech/{voice_id}/stream-input?model_id=...&output_format=pcm_22050&sync_alignment=...
//       upgraded to a WebSocket; the account key in the `xi-api-key` header (or `xi_api_key` in the first
//       message). A wrong key, an unknown voice or an unknown output format: closed with 1008 and the reason.
//   client  {"text": " ", "voice_settings"?, "generation_config"?: {"chunk_length_schedule"}, "xi_api_key"?}
//           (the first message: a single space opens the stream)
//           {"text": "...", "try_trigger_generation"?: bool, "flush"?: bool}   text to speak
//           {"text": ""}                                                      end of input
//   server  {"audio": "<base64>", "isFinal": false, "normalizedAlignment": {...}, "alignment": {"chars",
//           "charStartTimesMs", "charsDurationsMs"}}   audio as it is made, the alignment of its characters
//           in milliseconds from the start of that chunk
//           {"isFinal": true}   everything sent was spoken; then the server closes (1000)
//
// Text is buffered until it reaches the first length of `chunk_length_schedule` (default 120 characters,
// as the docs' default schedule starts), a `flush` or `try_trigger_generation` message, or the end of
// input; each generation is then spoken in order. Audio is the REST fake's (fakeSpeechPcm): 50 ms per
// character, AUDIO_CHARS_PER_MESSAGE characters per message, the first after `firstAudioDelayMs`, the
// others STREAM_CHUNK_INTERVAL_MS apart. Tests read what each connection received (`connections`) and may
// cut the next connection after some audio (`cutAfterMessages`: closed with 1011, no isFinal), or have each
// audio message's PCM sent in three messages split inside samples (`splitSamples`: the first of an odd number
// of bytes with the alignment, then an even number, then the rest), as a network chunk may split one.
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { ELEVENLABS_PRESET_VOICES } from '../../src/providers/voice/elevenlabs.js';

export const AUDIO_CHARS_PER_MESSAGE = 20;
const DEFAULT_SCHEDULE_FIRST = 120;

export interface StreamInputConnection {
  voice_id: string;
  query: Record<string, string>;
  headers: http.IncomingHttpHeaders;
  /** Every message received, parsed. */
  messages: Record<string, unknown>[];
  /** Characters spoken (audio sent for), all generations together. */
  characters_spoken: number;
  closed: boolean;
}

export interface StreamInputOptions {
  apiKey: string;
  /** Cloned voices of the fake (the preset voices exist too). */
  hasVoice(voice_id: string): boolean;
  pcm(voice_id: string, text: string, rateHz: number): Buffer;
  chunkIntervalMs: number;
}

export interface StreamInputFake {
  connections: StreamInputConnection[];
  /** Wait before each generation's first audio (a provider's time to first byte). */
  firstAudioDelayMs: number;
  /** The next connection is closed with 1011 after this many audio messages. */
  cutAfterMessages: number | null;
  /** While true, every audio message's PCM goes in three messages: an odd number of bytes, an even one, the rest. */
  splitSamples: boolean;
  close(): void;
}

const PATH = /^\/v1\/text-to-speech\/([^/]+)\/stream-input$/;

export function attachStreamInput(server: http.Server, opts: StreamInputOptions): StreamInputFake {
  const wss = new WebSocketServer({ noServer: true });
  const fake: StreamInputFake = {
    connections: [],
    firstAudioDelayMs: 0,
    cutAfterMessages: null,
    splitSamples: false,
    close: () => wss.close(),
  };
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const m = PATH.exec(url.pathname);
    if (!m) return socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
    wss.handleUpgrade(req, socket, head, (ws) => {
      const connection: StreamInputConnection = {
        voice_id: decodeURIComponent(m[1]!),
        query: Object.fromEntries(url.searchParams),
        headers: req.headers,
        messages: [],
        characters_spoken: 0,
        closed: false,
      };
      fake.connections.push(connection);
      const cutAfter = fake.cutAfterMessages;
      fake.cutAfterMessages = null;
      serve(ws, connection, opts, fake, cutAfter);
    });
  });
  return fake;
}

function serve(ws: WebSocket, c: StreamInputConnection, opts: StreamInputOptions, fake: StreamInputFake, cutAfter: number | null): void {
  const format = c.query['output_format'] ?? 'mp3_44100_128';
  const rate = /^pcm_(8000|16000|22050|24000|44100|48000)$/.exec(format)?.[1];
  let buffer = '';
  let schedule = DEFAULT_SCHEDULE_FIRST;
  let audioMessages = 0;
  let work: Promise<void> = Promise.resolve();
  ws.on('close', () => (c.closed = true));
  const refuse = (reason: string) => ws.close(1008, reason);
  if (!rate) return refuse(`Invalid output_format ${format}: this fake speaks pcm_* only`);
  if (!opts.hasVoice(c.voice_id) && !(ELEVENLABS_PRESET_VOICES as readonly string[]).includes(c.voice_id)) {
    return refuse(`A voice with the voice_id ${c.voice_id} was not found.`);
  }
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const generate = (text: string) => {
    work = work.then(async () => {
      if (text.length === 0 || ws.readyState !== ws.OPEN) return;
      await sleep(fake.firstAudioDelayMs);
      const chars = [...text];
      for (let i = 0; i < chars.length; i += AUDIO_CHARS_PER_MESSAGE) {
        if (i > 0) await sleep(opts.chunkIntervalMs);
        if (ws.readyState !== ws.OPEN) return;
        const part = chars.slice(i, i + AUDIO_CHARS_PER_MESSAGE);
        const alignment = { chars: part, charStartTimesMs: part.map((_, j) => j * 50), charsDurationsMs: part.map(() => 50) };
        const pcm = opts.pcm(c.voice_id, part.join(''), Number(rate));
        // Split: an odd number of bytes, then an even one (a byte still carried), then the rest.
        const cuts = fake.splitSamples ? [1001, 2001].filter((at) => at < pcm.length) : [];
        [0, ...cuts].forEach((from, k) => {
          const audio = pcm.subarray(from, cuts[k] ?? pcm.length).toString('base64');
          ws.send(
            JSON.stringify(k === 0 ? { audio, isFinal: false, normalizedAlignment: alignment, alignment } : { audio, isFinal: false }),
          );
        });
        c.characters_spoken += part.length;
        if (cutAfter !== null && ++audioMessages >= cutAfter) return void ws.close(1011, 'internal error');
      }
    });
  };
  ws.on('message', (data) => {
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(data.toString()) as Record<string, unknown>;
    } catch {
      return refuse('Invalid JSON');
    }
    c.messages.push(msg);
    if (c.messages.length === 1) {
      const key = c.headers['xi-api-key'] ?? msg['xi_api_key'];
      if (key !== opts.apiKey) return refuse('Invalid API key');
      if (msg['text'] !== ' ') return refuse('The first message must have text " " (a single space)');
      const s = (msg['generation_config'] as { chunk_length_schedule?: number[] } | undefined)?.chunk_length_schedule;
      if (s?.[0] !== undefined) schedule = s[0];
      return;
    }
    if (typeof msg['text'] !== 'string') return refuse('text is required');
    if (msg['text'] === '') {
      // End of input: the rest is spoken, then isFinal and the close.
      generate(buffer);
      buffer = '';
      work = work.then(() => {
        if (ws.readyState !== ws.OPEN) return;
        ws.send(JSON.stringify({ isFinal: true }));
        ws.close(1000);
      });
      return;
    }
    buffer += msg['text'];
    if (msg['flush'] === true || msg['try_trigger_generation'] === true || [...buffer].length >= schedule) {
      generate(buffer);
      buffer = '';
    }
  });
}
