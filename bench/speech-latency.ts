// Phase 8: speech's time to first audio byte and to last, through this service, through a relay floor and
// straight to the provider, side by side in one run. The provider is the ElevenLabs fake (test/fakes/), in
// this process, answering every synthesis after a fixed delay (SPEECH_PROVIDER_DELAY_MS) and then its
// chunks paced as it paces them; the product is an API process of its own (`npm run api`, as shipped, with
// ElevenLabs as its voice provider pointed at the fake). Three ways, each at 1 and at 50 concurrent speakers:
//
//   - HTTP streaming: POST /v2/audio/speech (stream_format audio, pcm) against the fake's
//     POST /v1/text-to-speech/{voice}/stream; the clock runs from the request to the first and the last
//     body byte.
//   - WebSocket: a context on an open GET /v2/audio/speech/stream against a connection of the fake's
//     stream-input opened for it (the service opens one per context, so the direct figure opens one too);
//     the clock runs from the message to the first and the last audio message.
//   - WebSocket with a Cartesia voice: a context on an open speech socket (which keeps one connection to
//     Cartesia's WebSocket, its fake's here, with the same delay) against a context on a connection to the
//     fake's /tts/websocket kept open by each speaker, as the service keeps its own.
//
// Fifty speakers, two ways: all starting in the same instant (a round of 50 requests sent together, the
// worst burst), and in flight together with their starts spread (speaker s starts s/50 of an utterance
// after the first, then each speaks back to back: at any moment about 50 are speaking, their requests
// arriving one after another, as 50 live conversations would). The first utterance of each spread
// speaker is not timed (until the last has started, fewer than 50 are speaking).
//
// The difference is what the service adds: authentication, the hold (a PostgreSQL transaction) before the
// provider is asked, and the relay. Target: at most 5 ms at p50 and 20 ms at p99 on the first byte. Each
// speaker has a workspace of its own (a workspace's holds queue on its balance's lock).
//
// A third column, in the same alternating rounds, is the floor of a relay (./speech-relay-floor.ts): a
// process that asks the provider what the service asks and hands on what comes back, and nothing else.
// Between the direct figure and the floor's is what any relay costs on this machine (a second process on
// the same cores, one more hop each way); between the floor's and the service's is the service's own work.
import http from 'node:http';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import WebSocket from 'ws';
import { startElevenLabsFake, STREAM_CHUNK_INTERVAL_MS, type ElevenLabsFake } from '../test/fakes/elevenlabs-fake.js';
import { startCartesiaFake, type CartesiaFake } from '../test/fakes/cartesia-fake.js';
import { CARTESIA_DEFAULT_VERSION, CARTESIA_PRESET_VOICES, CARTESIA_SAMPLE_RATE_HZ } from '../src/providers/voice/cartesia.js';
import { killAll, startEntryProcess, stopGracefully } from '../test/helpers/processes.js';
import { freePort } from '../test/helpers/infra.js';
import type { Infra } from '../test/helpers/infra.js';
import { newCustomer } from '../test/helpers/stack.js';
import { percentile } from './load.js';
import { subjectEnv } from './subject-env.js';
import { spawnSubject, type SubjectProcess } from './subject.js';
import { SPEECH_FLOOR_PATH } from './speech-relay-floor.js';
import type { Log } from './log.js';

/** The fake provider's fixed wait before the first audio of every synthesis. */
export const SPEECH_PROVIDER_DELAY_MS = 100;
/** What each request speaks: 100 characters (5 s of audio at the fake's 50 ms a character). */
const TEXT = 'The quick brown fox jumps over the lazy dog while the bench counts milliseconds, one by one, twice. ';
const VOICE = 'JBFqnCBsd6RMkjVDRZzb';
const CARTESIA_VOICE = CARTESIA_PRESET_VOICES[0];
/** Speakers at once, and the requests each series times. */
const CONCURRENCIES = [1, 50];
const REQUESTS: Record<number, number> = { 1: 40, 50: 200 };
const WARMUP = 10;
/** The targets on the first byte: what the service may add, in ms. */
export const SPEECH_TARGETS_MS = { p50: 5, p99: 20 };

interface Timing {
  first_ms: number;
  last_ms: number;
}

/** How a series' speakers start: all in the same instant (rounds of one request each), or spread over an utterance. */
type Arrival = 'together' | 'spread';
/** Utterances each spread speaker speaks per round, the first not timed. */
const SPREAD_UTTERANCES = 3;

export interface SpeechSeries {
  way: 'http' | 'websocket' | 'websocket cartesia';
  concurrency: number;
  arrival: Arrival;
  through: Timing[];
  /** Through the relay floor. */
  floor: Timing[];
  direct: Timing[];
  errors: number;
  first_error: string | null;
}

const since = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

/** One streamed POST: the time to its first body byte and to its end. */
function timedPost(url: string, headers: Record<string, string>, body: string): Promise<Timing> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = http.request(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, agent: false }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return reject(new Error(`HTTP ${res.statusCode}`));
      }
      let first_ms = -1;
      res.on('data', () => {
        if (first_ms < 0) first_ms = since(t0);
      });
      res.on('end', () => resolve({ first_ms, last_ms: since(t0) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** One context on an open speech socket: the time from its message to its first and its last audio. */
function timedContext(ws: WebSocket, context_id: string, voice = VOICE): Promise<Timing> {
  return new Promise((resolve, reject) => {
    let first_ms = -1;
    let last_ms = -1;
    const t0 = process.hrtime.bigint();
    const onMessage = (data: WebSocket.RawData) => {
      const m = JSON.parse(data.toString()) as { type: string; context_id: string; code?: string; message?: string };
      if (m.context_id !== context_id) return;
      if (m.type === 'audio') {
        last_ms = since(t0);
        if (first_ms < 0) first_ms = last_ms;
      } else if (m.type === 'error') {
        ws.off('message', onMessage);
        reject(new Error(`${m.code}: ${m.message}`));
      } else if (m.type === 'done') {
        ws.off('message', onMessage);
        resolve({ first_ms, last_ms });
      }
    };
    ws.on('message', onMessage);
    ws.send(JSON.stringify({ context_id, voice, text: TEXT }));
  });
}

/** A connection straight to the Cartesia fake's WebSocket, open. */
async function openCartesia(fake: CartesiaFake): Promise<WebSocket> {
  const ws = new WebSocket(`${fake.url.replace(/^http/, 'ws')}/tts/websocket`, {
    headers: { authorization: `Bearer ${fake.apiKey}`, 'cartesia-version': CARTESIA_DEFAULT_VERSION },
    perMessageDeflate: false,
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return ws;
}

/** One context on an open connection to the Cartesia fake: the time from its input to its first and last chunk. */
function timedCartesiaContext(ws: WebSocket, context_id: string): Promise<Timing> {
  return new Promise((resolve, reject) => {
    let first_ms = -1;
    let last_ms = -1;
    const t0 = process.hrtime.bigint();
    const onMessage = (data: WebSocket.RawData) => {
      const m = JSON.parse(data.toString()) as { type: string; context_id: string; message?: string };
      if (m.context_id !== context_id) return;
      if (m.type === 'chunk') {
        last_ms = since(t0);
        if (first_ms < 0) first_ms = last_ms;
      } else if (m.type === 'error' || m.type === 'done') {
        ws.off('message', onMessage);
        if (m.type === 'error') reject(new Error(m.message));
        else resolve({ first_ms, last_ms });
      }
    };
    ws.on('message', onMessage);
    ws.send(
      JSON.stringify({
        context_id,
        model_id: 'sonic-3',
        voice: { mode: 'id', id: CARTESIA_VOICE },
        output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: CARTESIA_SAMPLE_RATE_HZ },
        language: 'en',
        add_timestamps: true,
        transcript: TEXT,
        continue: false,
      }),
    );
  });
}

/**
 * One utterance straight at the fake's stream-input: connect, send, and the first and last audio. It asks
 * what the service asks (the characters' alignment with the audio, which the service turns into word
 * timestamps), so both sides time the same work of the provider.
 */
function timedStreamInput(fake: ElevenLabsFake): Promise<Timing> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const base = fake.url.replace(/^http/, 'ws');
    const ws = new WebSocket(
      `${base}/v1/text-to-speech/${VOICE}/stream-input?model_id=eleven_multilingual_v2&output_format=pcm_22050&sync_alignment=true`,
      {
        headers: { 'xi-api-key': fake.apiKey },
        perMessageDeflate: false,
      },
    );
    let first_ms = -1;
    let last_ms = -1;
    ws.on('open', () => {
      for (const text of [' ', TEXT, '']) ws.send(JSON.stringify({ text }));
    });
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as { audio?: string; isFinal?: boolean };
      if (m.audio) {
        last_ms = since(t0);
        if (first_ms < 0) first_ms = last_ms;
      }
      if (m.isFinal) resolve({ first_ms, last_ms });
    });
    ws.on('error', reject);
    ws.on('close', (code) => (last_ms < 0 ? reject(new Error(`closed ${code}`)) : undefined));
  });
}

/** A speech socket of the service (`key`: its bearer) or of the relay floor (no key). */
async function openSocket(api: string, key: string | null): Promise<WebSocket> {
  const path = key === null ? `${SPEECH_FLOOR_PATH}/stream` : '/v2/audio/speech/stream';
  const ws = new WebSocket(`${api.replace(/^http/, 'ws')}${path}`, {
    headers: key === null ? {} : { authorization: `Bearer ${key}` },
    perMessageDeflate: false,
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return ws;
}

/** Runs `n` timed calls, `concurrency` at once, each speaker calling `one(speaker, i)`; errors counted. */
async function series(n: number, concurrency: number, one: (speaker: number, i: number) => Promise<Timing>) {
  const timings: Timing[] = [];
  let errors = 0;
  let first_error: string | null = null;
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, speaker) => {
      while (next < n) {
        const i = next++;
        try {
          timings.push(await one(speaker, i));
        } catch (err) {
          errors++;
          first_error ??= (err as Error).message;
        }
      }
    }),
  );
  return { timings, errors, first_error };
}

/** One timed request of a speaker (its i-th). */
type One = (speaker: number, i: number) => Promise<Timing>;

/**
 * `concurrency` speakers spread over one utterance (`utterance_ms`): speaker s starts s/concurrency of it
 * after the first, then speaks SPREAD_UTTERANCES times back to back; each speaker's first is not timed.
 */
async function spread(concurrency: number, utterance_ms: number, one: One) {
  const timings: Timing[] = [];
  let errors = 0;
  let first_error: string | null = null;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, speaker) => {
      await new Promise((r) => setTimeout(r, (speaker * utterance_ms) / concurrency));
      for (let i = 0; i < SPREAD_UTTERANCES; i++) {
        try {
          const t = await one(speaker, i);
          if (i > 0) timings.push(t);
        } catch (err) {
          errors++;
          first_error ??= (err as Error).message;
        }
      }
    }),
  );
  return { timings, errors, first_error };
}

/** The three ways to the provider each series times. */
type Ways = Record<'through' | 'floor' | 'direct', One>;
const WAYS = ['through', 'floor', 'direct'] as const;

/**
 * Through the service, through the relay floor and straight to the provider, in alternating rounds (drift
 * on a shared machine hits all three; the one that goes first moves on by one each round), `n` timed
 * requests each: together (rounds of `concurrency` requests at once, each speaker calling again as soon
 * as it is done) or spread (see `spread`, over the median utterance of the warm-up).
 */
async function compare(
  way: SpeechSeries['way'],
  concurrency: number,
  arrival: Arrival,
  n: number,
  warm: Ways,
  timed: Ways,
): Promise<SpeechSeries> {
  const w = await series(WARMUP, Math.min(concurrency, WARMUP), warm.through);
  for (const k of ['floor', 'direct'] as const) await series(WARMUP, Math.min(concurrency, WARMUP), warm[k]);
  const utterance_ms = percentile(sortedOf(w.timings, 'last_ms'), 50);
  const timings: Record<(typeof WAYS)[number], Timing[]> = { through: [], floor: [], direct: [] };
  let errors = 0;
  let first_error: string | null = null;
  const perRound = arrival === 'together' ? n / 4 : concurrency * (SPREAD_UTTERANCES - 1);
  for (let round = 0; timings.through.length < n; round++) {
    const run = (one: One) => (arrival === 'together' ? series(perRound, concurrency, one) : spread(concurrency, utterance_ms, one));
    for (let i = 0; i < WAYS.length; i++) {
      const k = WAYS[(round + i) % WAYS.length]!;
      const r = await run(timed[k]);
      timings[k].push(...r.timings);
      errors += r.errors;
      first_error ??= r.first_error;
    }
    if (timings.through.length === 0 || round > 8) break;
  }
  return { way, concurrency, arrival, ...timings, errors, first_error };
}

/** A round trip to another process on this machine: back to back, and after the process sat idle. */
export interface HopTimes {
  busy_p50_ms: number;
  idle_p50_ms: number;
  idle_ms: number;
}

/** Phase 8's figures: the series, and what one hop between processes costs here. */
export interface SpeechLatency {
  series: SpeechSeries[];
  hop: HopTimes;
}

/** Requests each way of the hop measurement, and the pause before each of the idle ones. */
const HOP_REQUESTS = 100;
const HOP_IDLE_MS = 20;

/**
 * The cost of a hop: keep-alive GETs to the relay floor's ping, back to back, then each after
 * HOP_IDLE_MS of quiet (a process woken from idle, as at one speaker, may take longer to answer than a
 * busy one: the machine's, not the code's).
 */
async function hopTimes(url: string): Promise<HopTimes> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const ping = () =>
    new Promise<number>((resolve, reject) => {
      const t0 = process.hrtime.bigint();
      http
        .get(url, { agent }, (res) => {
          res.resume();
          res.on('end', () => resolve(since(t0)));
        })
        .on('error', reject);
    });
  const p50 = async (pause_ms: number) => {
    const times: number[] = [];
    for (let i = 0; i < HOP_REQUESTS; i++) {
      if (pause_ms > 0) await new Promise((r) => setTimeout(r, pause_ms));
      times.push(await ping());
    }
    return percentile(
      times.sort((a, b) => a - b),
      50,
    );
  };
  try {
    await p50(0); // the connection opened and warm
    return { busy_p50_ms: await p50(0), idle_p50_ms: await p50(HOP_IDLE_MS), idle_ms: HOP_IDLE_MS };
  } finally {
    agent.destroy();
  }
}

export async function benchSpeechLatency(infra: Infra, log: Log): Promise<SpeechLatency> {
  const fake = await startElevenLabsFake();
  const cartesia = await startCartesiaFake();
  cartesia.ws.firstAudioDelayMs = SPEECH_PROVIDER_DELAY_MS;
  cartesia.ws.chunkIntervalMs = STREAM_CHUNK_INTERVAL_MS;
  fake.streamInput.firstAudioDelayMs = SPEECH_PROVIDER_DELAY_MS;
  fake.fail('stream', { delayMs: SPEECH_PROVIDER_DELAY_MS }, 1_000_000);
  const port = await freePort();
  const { env } = await subjectEnv(infra, 'product', {
    PORT: String(port),
    VOICE_PROVIDERS: 'elevenlabs,cartesia',
    ELEVENLABS_API_KEY: fake.apiKey,
    ELEVENLABS_BASE_URL: fake.url,
    CARTESIA_API_KEY: cartesia.apiKey,
    CARTESIA_BASE_URL: cartesia.url,
  });
  const children: ChildProcess[] = [];
  const out: SpeechSeries[] = [];
  let hop: HopTimes | null = null;
  let relay: SubjectProcess | null = null;
  try {
    log('phase 8: starting an API process with ElevenLabs and Cartesia (their fakes) as the voice providers');
    // Profiled (BENCH_CPU_PROF_DIR), it is stopped with SIGTERM at the end, so that the profile is written.
    const profDir = process.env['BENCH_CPU_PROF_DIR'];
    const execArgv = profDir ? ['--cpu-prof', `--cpu-prof-dir=${path.join(profDir, 'speech')}`] : [];
    const apiProcess = await startEntryProcess({ env }, 'api', { track: children, execArgv });
    const api = `http://127.0.0.1:${port}`;
    relay = await spawnSubject(
      'speechrelay',
      {
        ...process.env,
        ELEVENLABS_API_KEY: fake.apiKey,
        ELEVENLABS_BASE_URL: fake.url,
        CARTESIA_API_KEY: cartesia.apiKey,
        CARTESIA_BASE_URL: cartesia.url,
      },
      { cpuProfDir: profDir ? path.join(profDir, 'speech-floor') : undefined },
    );
    const floorUrl = relay.url;
    log('phase 8: a round trip to another process, busy and after a pause');
    hop = await hopTimes(`${floorUrl}${SPEECH_FLOOR_PATH}/ping`);
    // A workspace per speaker: a workspace's holds take its balance's lock one at a time, which is the
    // workspace's own queue, not what the service adds to a speaker's first byte.
    const keys = await Promise.all(Array.from({ length: Math.max(...CONCURRENCIES) }, () => newCustomer({ baseUrl: api }, 1_000)));
    const direct = `${fake.url}/v1/text-to-speech/${VOICE}/stream?output_format=pcm_22050`;
    const through = `${api}/v2/audio/speech`;
    const httpBody = JSON.stringify({ input: TEXT, voice: VOICE, response_format: 'pcm', stream_format: 'audio' });
    const directBody = JSON.stringify({ text: TEXT, model_id: 'eleven_multilingual_v2' });
    const floorBody = JSON.stringify({ input: TEXT, voice: VOICE });
    let ctx = 0;
    for (const concurrency of CONCURRENCIES) {
      const n = REQUESTS[concurrency]!;
      const arrivals: Arrival[] = concurrency === 1 ? ['together'] : ['together', 'spread'];
      const bearer = (speaker: number) => ({ authorization: `Bearer ${keys[speaker]!.key}` });
      for (const arrival of arrivals) {
        log(`phase 8: HTTP streaming, ${concurrency} speakers${concurrency > 1 ? `, ${arrival}` : ''}`);
        const http = {
          through: (sp: number) => timedPost(through, bearer(sp), httpBody),
          floor: () => timedPost(`${floorUrl}${SPEECH_FLOOR_PATH}`, {}, floorBody),
          direct: () => timedPost(direct, { 'xi-api-key': fake.apiKey }, directBody),
        };
        out.push(await compare('http', concurrency, arrival, n, http, http));
      }

      const sockets = await Promise.all(Array.from({ length: concurrency }, (_, sp) => openSocket(api, keys[sp]!.key)));
      const floorSockets = await Promise.all(Array.from({ length: concurrency }, () => openSocket(floorUrl, null)));
      for (const arrival of arrivals) {
        log(`phase 8: WebSocket, ${concurrency} speakers${concurrency > 1 ? `, ${arrival}` : ''}`);
        const socket = (prefix: string) => ({
          through: (s: number) => timedContext(sockets[s]!, `${prefix}${ctx++}`),
          floor: (s: number) => timedContext(floorSockets[s]!, `${prefix}f${ctx++}`),
          direct: () => timedStreamInput(fake),
        });
        out.push(await compare('websocket', concurrency, arrival, n, socket('w'), socket('c')));
      }

      const straight = await Promise.all(Array.from({ length: concurrency }, () => openCartesia(cartesia)));
      for (const arrival of arrivals) {
        log(`phase 8: WebSocket with a Cartesia voice, ${concurrency} speakers${concurrency > 1 ? `, ${arrival}` : ''}`);
        const cartesiaWay = (prefix: string) => ({
          through: (s: number) => timedContext(sockets[s]!, `${prefix}${ctx++}`, CARTESIA_VOICE),
          floor: (s: number) => timedContext(floorSockets[s]!, `${prefix}f${ctx++}`, CARTESIA_VOICE),
          direct: (s: number) => timedCartesiaContext(straight[s]!, `${prefix}d${ctx++}`),
        });
        out.push(await compare('websocket cartesia', concurrency, arrival, n, cartesiaWay('w'), cartesiaWay('c')));
      }
      for (const s of [...sockets, ...floorSockets, ...straight]) s.close();
    }
    if (profDir) await stopGracefully(apiProcess);
  } finally {
    await relay?.stop();
    killAll(children);
    await Promise.all([fake.close(), cartesia.close()]);
  }
  return { series: out, hop: hop! };
}

const ms = (v: number) => (Number.isNaN(v) ? '-' : v.toFixed(1));
const signed = (v: number) => (Number.isNaN(v) ? '-' : `${v < 0 ? '' : '+'}${v.toFixed(1)}`);
const sortedOf = (t: Timing[], k: keyof Timing) => t.map((x) => x[k]).sort((a, b) => a - b);

export function formatSpeechLatency({ series: list, hop }: SpeechLatency): string {
  const t = SPEECH_TARGETS_MS;
  const lines = [
    `8. speech: time to first and last audio byte, through the service, through a relay floor and straight to the provider (ElevenLabs' or Cartesia's fake, ${SPEECH_PROVIDER_DELAY_MS} ms to first audio)`,
    `   ${'way'.padEnd(18)} ${'speakers'.padStart(12)}  ${'n'.padStart(4)}  ${'first p50'.padStart(24)}  ${'first p99'.padStart(24)}  ${'last p50'.padStart(24)}  ` +
      `service over direct (target <= ${t.p50} / ${t.p99} ms)  service over floor  floor over direct`,
  ];
  for (const s of list) {
    const f = (w: 'through' | 'floor' | 'direct', k: keyof Timing, p: number) => percentile(sortedOf(s[w], k), p);
    const three = (k: keyof Timing, p: number) => `${ms(f('through', k, p))} / ${ms(f('floor', k, p))} / ${ms(f('direct', k, p))}`;
    const added = (a: 'through' | 'floor', b: 'floor' | 'direct') =>
      `${signed(f(a, 'first_ms', 50) - f(b, 'first_ms', 50))} / ${signed(f(a, 'first_ms', 99) - f(b, 'first_ms', 99))} ms`;
    lines.push(
      `   ${s.way.padEnd(18)} ${`${s.concurrency}${s.concurrency > 1 ? `, ${s.arrival}` : ''}`.padStart(12)}  ${String(s.through.length).padStart(4)}  ` +
        `${three('first_ms', 50).padStart(24)}  ${three('first_ms', 99).padStart(24)}  ${three('last_ms', 50).padStart(24)}  ` +
        `${added('through', 'direct').padStart(44)}  ${added('through', 'floor').padStart(18)}  ${added('floor', 'direct').padStart(17)}` +
        (s.errors ? `  (${s.errors} failed: ${s.first_error})` : ''),
    );
  }
  lines.push(
    `   a round trip to another process here (HTTP, keep-alive), p50: ${ms(hop.busy_p50_ms)} ms back to back, ` +
      `${ms(hop.idle_p50_ms)} ms after ${hop.idle_ms} ms idle (a relay adds two hops, the service's hold two more)`,
    '   (ms, service / floor / direct; added: at p50 / p99 of the first byte; the three measured in alternating rounds in one run;',
    '    the floor relays and does nothing else; the machine is shared, so figures are noisy;',
    '    50 together: rounds of 50 requests sent in the same instant; 50 spread: 50 speaking at once, their starts spread over an utterance)',
  );
  return lines.join('\n') + '\n';
}
