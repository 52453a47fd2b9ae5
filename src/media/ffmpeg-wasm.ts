// FFmpeg as WebAssembly, for the first frame of a stored MP4 as a JPEG (GET /v1/videos/{id}/content?
// variant=thumbnail) and the compressed speech formats (src/media/audio-encode.ts).
//
// Decoding is FFmpeg's own H.264 decoder (any profile: the simulator's Main-profile clips and the High
// profile real providers deliver) from @ffmpeg/core, FFmpeg compiled to WebAssembly and shipped inside
// the npm package: nothing is downloaded at install or run time. @ffmpeg/core is built for web workers,
// so it runs here in one Node worker thread (given the `self` its loader reads and the .wasm bytes from
// disk): its ~0.5 s of CPU per frame never blocks the API's event loop. Requests are served one at a
// time; at most THUMBNAIL_MAX_QUEUED wait, more are a 503 the client may retry.
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ApiError } from '../errors.js';

/** Largest MP4 decoded for a thumbnail (the whole file is copied into the worker's memory). */
export const THUMBNAIL_MAX_VIDEO_BYTES = 512 * 1024 * 1024;
export const THUMBNAIL_MAX_QUEUED = 16;
/** One frame, decode and encode, within this (FFmpeg's own timeout; the worker is replaced after). */
export const THUMBNAIL_TIMEOUT_MS = 30_000;

// The worker's code: CommonJS, run with `eval` so it works the same under tsx and from dist/.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
globalThis.self = { location: { href: workerData.coreDirUrl } };
const ready = import(workerData.coreEntryUrl).then((m) =>
  m.default({ wasmBinary: fs.readFileSync(workerData.wasmPath), print() {}, printErr() {} }));
parentPort.on('message', async ({ id, input, input_name, args, output_name, timeout_ms }) => {
  try {
    const core = await ready;
    core.reset();
    core.setTimeout(timeout_ms);
    core.FS.writeFile(input_name, new Uint8Array(input));
    const rc = core.exec('-i', input_name, ...args, output_name);
    let out = null;
    try { out = rc === 0 ? core.FS.readFile(output_name) : null; } catch {}
    for (const f of [input_name, output_name]) { try { core.FS.unlink(f); } catch {} }
    parentPort.postMessage({ id, output: out && out.length > 0 ? out : null, rc });
  } catch (err) {
    parentPort.postMessage({ id, output: null, rc: -1, error: String(err && err.message || err) });
  }
});
`;

interface Pending {
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

const unavailable = (message: string) => new ApiError(503, 'api_error', 'media_worker_unavailable', message, null, { 'Retry-After': '5' });

/** One FFmpeg (WebAssembly) in a worker thread, running one command at a time on in-memory files. */
export class FfmpegWasm {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  /** `ffmpeg -i <input_name> ...args <output_name>`: the output's bytes, or null when FFmpeg failed. */
  async run(input: Buffer, input_name: string, args: readonly string[], output_name: string): Promise<Buffer | null> {
    if (this.pending.size >= THUMBNAIL_MAX_QUEUED) throw unavailable('too many media conversions are running right now; retry in a moment');
    const worker = this.ensureWorker();
    const id = this.nextId++;
    return new Promise<Buffer | null>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, input, input_name, args, output_name, timeout_ms: THUMBNAIL_TIMEOUT_MS });
    });
  }

  /** The first frame of `mp4` as a JPEG; a 422 when the file cannot be decoded. */
  async firstFrameJpeg(mp4: Buffer): Promise<Buffer> {
    if (mp4.length > THUMBNAIL_MAX_VIDEO_BYTES) throw new ApiError(422, 'invalid_request_error', 'video_too_large', 'the video is too large to make a thumbnail of');
    const jpeg = await this.run(mp4, 'in.mp4', ['-frames:v', '1', '-f', 'image2', '-c:v', 'mjpeg', '-q:v', '3'], 'out.jpg');
    if (!jpeg) throw new ApiError(422, 'invalid_request_error', 'video_not_decodable', 'the first frame of this video could not be decoded');
    return jpeg;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    if (w) await w.terminate();
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: coreFiles() });
    worker.unref();
    worker.on('message', (m: { id: number; output: Uint8Array | null; rc: number; error?: string }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error) p.reject(unavailable(`the media worker failed (${m.error})`));
      else p.resolve(m.output ? Buffer.from(m.output.buffer, m.output.byteOffset, m.output.byteLength) : null);
    });
    const fail = (err: Error) => {
      if (this.worker === worker) this.worker = null;
      for (const [id, p] of this.pending) {
        this.pending.delete(id);
        p.reject(unavailable(`the media worker stopped (${err.message})`));
      }
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`exit ${code}`)));
    this.worker = worker;
    return worker;
  }
}
