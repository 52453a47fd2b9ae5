// FFmpeg as WebAssembly, for the first frame of a stored MP4 as a JPEG (./thumbnails.ts) and the
// compressed speech formats (./audio-encode.ts).
//
// Decoding is FFmpeg's own H.264 decoder (any profile: the simulator's Main-profile clips and the High
// profile real providers deliver) from @ffmpeg/core, FFmpeg compiled to WebAssembly and shipped inside
// the npm package: nothing is downloaded at install or run time. @ffmpeg/core is built for web workers,
// so it runs here in one Node worker thread (given the `self` its loader reads and the .wasm bytes from
// disk): its ~0.5 s of CPU per frame never blocks the API's event loop.
//
// Work comes in two lanes, each with its own places (running or waiting): `speech` and `thumbnail`. A
// place is reserved before the work is worth doing (a speech's encode before its provider is called, so
// audio the provider made always finds its encoder), and a full lane is a 503 the client may retry.
// Commands run one at a time, speech first: thumbnails can neither take speech's places nor delay an
// encode by more than the one command running.
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ApiError } from '../errors.js';

/** The lanes of work, and the places of each (running or waiting). */
export type MediaLane = 'speech' | 'thumbnail';
export const MEDIA_LANE_PLACES: Readonly<Record<MediaLane, number>> = { speech: 16, thumbnail: 4 };
/** One command, decode and encode, within this (FFmpeg's own timeout). */
export const MEDIA_COMMAND_TIMEOUT_MS = 30_000;
// Every command runs on an FFmpeg of its own, instantiated from the WebAssembly module the worker
// compiled once. FFmpeg's `main` is not made to run twice: each run ends in `exit`, which @ffmpeg/core
// turns into an exception that unwinds past the C code, so the stack it used is never given back (224
// bytes a run, kilobytes a failed one) and FFmpeg's statics are never reset. After some 30 commands on
// one instance its stack reaches its data, and a later command fails or traps ("memory access out of
// bounds") whatever its input. A fresh instance costs some 50 ms (the next one is made while the worker
// waits) and makes a command's outcome depend on its input alone: a command that throws would throw
// again on the same input, so it is never run twice.
// The input is handed over, not copied: the caller's buffer moves to the worker and into FFmpeg's
// in-memory file system as it is, so a command holds one copy of its input.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
globalThis.self = { location: { href: workerData.coreDirUrl } };
const factory = import(workerData.coreEntryUrl).then((m) => m.default);
const compiled = WebAssembly.compile(fs.readFileSync(workerData.wasmPath));
const fresh = () => {
  const made = Promise.all([factory, compiled]).then(([make, module]) => new Promise((resolve, reject) => {
    const instantiateWasm = (imports, done) => {
      WebAssembly.instantiate(module, imports).then((instance) => done(instance), reject);
      return {};
    };
    make({ instantiateWasm, print() {}, printErr() {} }).then(resolve, reject);
  }));
  made.catch(() => {});
  return made;
};
let next = fresh();
parentPort.on('message', async ({ id, input, input_name, args, output_name, timeout_ms }) => {
  try {
    const core = await next;
    next = fresh();
    core.setTimeout(timeout_ms);
    core.FS.writeFile(input_name, input, { canOwn: true });
    const rc = core.exec('-i', input_name, ...args, output_name);
    let out = null;
    try { out = rc === 0 ? core.FS.readFile(output_name) : null; } catch {}
    parentPort.postMessage({ id, output: out && out.length > 0 ? out : null, rc });
  } catch (err) {
    parentPort.postMessage({ id, output: null, rc: -1, error: String(err && err.message || err) });
  }
});
`;

/**
 * `ffmpeg -i <input_name> ...args <output_name>` on in-memory files: the output's bytes, or null when FFmpeg failed.
 * The command takes `input`: its memory moves to the media worker, and the caller's buffer is left empty.
 */
export type MediaCommand = (input: Buffer, input_name: string, args: readonly string[], output_name: string) => Promise<Buffer | null>;

/** A place in a lane: its commands run without being refused until it is released. */
export interface MediaReservation {
  run: MediaCommand;
  /** Gives the place back (again: nothing). */
  release(): void;
}

interface Task {
  id: number;
  lane: MediaLane;
  message: { input: Buffer; input_name: string; args: readonly string[]; output_name: string };
  worker?: Worker;
  resolve(output: Buffer | null): void;
  reject(err: Error): void;
}

function coreFiles() {
  const require = createRequire(import.meta.url);
  const umdEntry = require.resolve('@ffmpeg/core'); // dist/umd/ffmpeg-core.js
  const esmDir = path.join(path.dirname(umdEntry), '..', 'esm');
  return {
    coreEntryUrl: pathToFileURL(path.join(esmDir, 'ffmpeg-core.js')).href,
    coreDirUrl: pathToFileURL(esmDir + path.sep).href,
    wasmPath: path.join(esmDir, 'ffmpeg-core.wasm'),
  };
}

export const mediaUnavailable = (message: string) =>
  new ApiError(503, 'api_error', 'media_worker_unavailable', message, null, { 'Retry-After': '5' });

/**
 * FFmpeg threw (a WebAssembly trap such as "memory access out of bounds") on a fresh instance: the same
 * input would make it throw again, so the caller must not run the command again as it is.
 */
export class MediaCommandTrapped extends ApiError {
  constructor(readonly trap: string) {
    super(503, 'api_error', 'media_worker_unavailable', `the media worker failed (${trap})`, null, { 'Retry-After': '5' });
  }
}

const LANE_FULL: Record<MediaLane, string> = {
  speech: 'too many speeches in opus, aac or flac are being made right now; nothing was charged; retry in a moment',
  thumbnail: 'too many thumbnails are being made right now; retry in a moment',
};

/** One FFmpeg (WebAssembly) in a worker thread, running one command at a time on in-memory files. */
export class FfmpegWasm {
  private worker: Worker | null = null;
  private readonly held: Record<MediaLane, number> = { speech: 0, thumbnail: 0 };
  private readonly waiting: Record<MediaLane, Task[]> = { speech: [], thumbnail: [] };
  private running: Task | null = null;
  private nextId = 1;
  private workers_started = 0;

  constructor(private readonly places: Readonly<Record<MediaLane, number>> = MEDIA_LANE_PLACES) {}

  /** Reserves a place in `lane`, or throws a 503 (media_worker_unavailable) when the lane is full. */
  reserve(lane: MediaLane): MediaReservation {
    if (this.held[lane] >= this.places[lane]) throw mediaUnavailable(LANE_FULL[lane]);
    this.held[lane]++;
    let released = false;
    return {
      run: (input, input_name, args, output_name) => {
        if (released) return Promise.reject(new Error('invariant: a media reservation runs nothing once released'));
        return this.enqueue(lane, { input, input_name, args, output_name });
      },
      release: () => {
        if (released) return;
        released = true;
        this.held[lane]--;
      },
    };
  }

  /** One command in `lane` with a place of its own (a 503 when the lane is full). */
  async run(
    input: Buffer,
    input_name: string,
    args: readonly string[],
    output_name: string,
    lane: MediaLane = 'thumbnail',
  ): Promise<Buffer | null> {
    const place = this.reserve(lane);
    try {
      return await place.run(input, input_name, args, output_name);
    } finally {
      place.release();
    }
  }

  /** Places taken in `lane` now (for tests and metrics). */
  placesHeld(lane: MediaLane): number {
    return this.held[lane];
  }

  /** Worker threads started so far: one, and one more after each that stopped. */
  workersStarted(): number {
    return this.workers_started;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    for (const lane of ['speech', 'thumbnail'] as const)
      for (const t of this.waiting[lane].splice(0)) t.reject(mediaUnavailable('the media worker stopped'));
    if (w) await w.terminate();
  }

  private enqueue(lane: MediaLane, message: Task['message']): Promise<Buffer | null> {
    return new Promise<Buffer | null>((resolve, reject) => {
      this.waiting[lane].push({ id: this.nextId++, lane, message, resolve, reject });
      this.pump();
    });
  }

  /** Hands the next command (speech first) to the worker when it is idle. */
  private pump(): void {
    if (this.running) return;
    const task = this.waiting.speech.shift() ?? this.waiting.thumbnail.shift();
    if (!task) return;
    const worker = this.ensureWorker();
    task.worker = worker;
    this.running = task;
    const { input, ...rest } = task.message;
    // Moved, not copied (a buffer sharing its memory with others is copied once, into one of its own).
    const owned = input.byteOffset === 0 && input.byteLength === input.buffer.byteLength ? input : Uint8Array.prototype.slice.call(input);
    worker.postMessage({ id: task.id, input: owned, ...rest, timeout_ms: MEDIA_COMMAND_TIMEOUT_MS }, [owned.buffer as ArrayBuffer]);
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: coreFiles() });
    this.workers_started++;
    worker.unref();
    worker.on('message', (m: { id: number; output: Uint8Array | null; rc: number; error?: string }) => {
      const t = this.running;
      if (!t || t.id !== m.id) return;
      this.running = null;
      // FFmpeg threw on a fresh instance: it would throw again on this input, so it is not run again.
      if (m.error) t.reject(new MediaCommandTrapped(m.error));
      else t.resolve(m.output ? Buffer.from(m.output.buffer, m.output.byteOffset, m.output.byteLength) : null);
      this.pump();
    });
    const fail = (err: Error) => {
      if (this.worker === worker) this.worker = null;
      const t = this.running;
      if (t && t.worker === worker) {
        this.running = null;
        t.reject(mediaUnavailable(`the media worker stopped (${err.message})`));
      }
      // The next command gets a new worker.
      if (this.worker === null && !this.running) this.pump();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`exit ${code}`)));
    this.worker = worker;
    return worker;
  }
}
