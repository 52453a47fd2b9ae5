// Files of batches: uploaded input files (JSONL, one request per line, kept in storage like the videos)
// and each batch's output and error files, rendered from its requests when read, so their download
// URLs are signed at that moment.
import { randomUUID } from 'node:crypto';
import type { Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import { ApiError, notFound } from '../errors.js';
import { isUuid } from '../ids.js';
import { microEurToEur } from '../money.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';
import type { DownloadUrlSigner } from '../storage/signed-urls.js';
import { readBatchVideoJobs, type VideoJobRecord } from '../video-jobs/records.js';
import { readFile, type FileRecord } from './records.js';
import { BATCH_LINE_BYTES_MAX, BATCH_REQUESTS_MAX } from './schemas.js';

const fileKey = (id: string) => `files/${id}.jsonl`;

const invalidFile = (message: string) => new ApiError(400, 'invalid_request_error', 'invalid_file', message, 'file');

/** The requests of a JSONL file: one JSON object per line (blank lines skipped), bounded in lines and bytes per line. */
export function parseJsonl(text: Buffer): unknown[] {
  const out: unknown[] = [];
  let start = 0;
  let line = 0;
  while (start < text.length) {
    let end = text.indexOf(0x0a, start);
    if (end === -1) end = text.length;
    line++;
    if (end - start > BATCH_LINE_BYTES_MAX) throw invalidFile(`line ${line} is longer than ${BATCH_LINE_BYTES_MAX} bytes`);
    const raw = text.subarray(start, end).toString('utf8').trim();
    start = end + 1;
    if (raw === '') continue;
    if (out.length === BATCH_REQUESTS_MAX) throw invalidFile(`a batch file holds at most ${BATCH_REQUESTS_MAX} requests`);
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      throw invalidFile(`line ${line} is not JSON`);
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalidFile(`line ${line} is not a JSON object`);
    out.push(value);
  }
  if (out.length === 0) throw invalidFile('the file holds no request');
  return out;
}

/** How an output line presents a request that succeeded (the /v2 and /v1 surfaces differ). */
export interface ResultPresenters {
  video(job: VideoJobRecord): Promise<unknown>;
  speech(s: SpeechRow): Promise<unknown>;
}

export interface SpeechRow {
  id: string;
  model: string;
  voice: string;
  characters: number;
  cost_micro_eur: number;
  response_format: string;
  audio_storage_key: string | null;
  audio_content_type: string | null;
  created_at_ms: number;
}

/** A batch's speech as its output line has it: the speech's record with its audio's signed URL. */
export async function presentBatchSpeech(s: SpeechRow, urls: DownloadUrlSigner, baseUrl: string) {
  const audio = s.audio_storage_key ? await urls.downloadUrl(s.audio_storage_key, baseUrl) : null;
  return {
    id: s.id,
    object: 'audio.speech' as const,
    model: s.model,
    voice: s.voice,
    characters: s.characters,
    response_format: s.response_format,
    cost_in_euro: microEurToEur(s.cost_micro_eur),
    created: Math.floor(s.created_at_ms / 1000),
    audio: audio && { url: audio.url, expires_at: audio.expires_at, content_type: s.audio_content_type },
  };
}

export class FilesService {
  constructor(private readonly deps: { db: Db; storage: Storage }) {}

  /** Keeps an uploaded batch input file, checked line by line first (at most BATCH_REQUESTS_MAX requests). */
  async upload(principal: ApiKeyPrincipal, file: { buffer: Buffer; filename: string }): Promise<FileRecord> {
    const lines = parseJsonl(file.buffer);
    const id = randomUUID();
    await this.deps.storage.put(fileKey(id), file.buffer, 'application/jsonl');
    await this.deps.db.query(
      `INSERT INTO files (id, workspace_id, purpose, filename, bytes, lines, storage_key) VALUES ($1, $2, 'batch', $3, $4, $5, $6)`,
      [id, principal.workspace_id, file.filename.slice(0, 255) || 'batch.jsonl', file.buffer.length, lines.length, fileKey(id)],
    );
    return (await readFile(this.deps.db, id))!;
  }

  async get(principal: ApiKeyPrincipal, id: string): Promise<FileRecord> {
    const f = isUuid(id) ? await readFile(this.deps.db, id) : null;
    if (!f || f.workspace_id !== principal.workspace_id) throw notFound('file_not_found', `no file ${id}`, 'id');
    return f;
  }

  /** The requests of an input file of the caller's workspace. */
  async batchInputLines(principal: ApiKeyPrincipal, id: string): Promise<unknown[]> {
    const f = await this.get(principal, id).catch(() => {
      throw notFound('file_not_found', `no file ${id}`, 'input_file_id');
    });
    if (f.purpose !== 'batch')
      throw new ApiError(400, 'invalid_request_error', 'invalid_parameter', `file ${id} is not a batch input file`, 'input_file_id');
    return parseJsonl(await this.bytesOf(f));
  }

  private async bytesOf(f: FileRecord): Promise<Buffer> {
    const opened = await this.deps.storage.open(f.storage_key!);
    if (!opened) throw new ApiError(410, 'invalid_request_error', 'file_gone', `the content of file ${f.id} is no longer kept`);
    const chunks: Buffer[] = [];
    for await (const chunk of opened.stream) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  /** The file's content: an input file as uploaded; an output or error file rendered as JSONL now. */
  async content(principal: ApiKeyPrincipal, id: string, present: ResultPresenters): Promise<{ file: FileRecord; body: Buffer }> {
    const f = await this.get(principal, id);
    if (f.purpose === 'batch') return { file: f, body: await this.bytesOf(f) };
    return { file: f, body: Buffer.from(await this.render(f, present)) };
  }

  private async render(f: FileRecord, present: ResultPresenters): Promise<string> {
    const output = f.purpose === 'batch_output';
    const items = await this.deps.db.query<{
      idx: number;
      custom_id: string | null;
      kind: string;
      request_id: string;
      error: { code: string; message: string } | null;
    }>('SELECT idx, custom_id, kind, request_id, error FROM batch_items WHERE batch_id = $1 AND status = $2 ORDER BY idx', [
      f.batch_id,
      output ? 'completed' : 'failed',
    ]);
    if (!output)
      return items.rows
        .map((i) => JSON.stringify({ id: i.request_id, custom_id: i.custom_id, response: null, error: i.error }) + '\n')
        .join('');
    const jobs = await readBatchVideoJobs(this.deps.db, f.batch_id!);
    const speech = await this.deps.db.query<SpeechRow>(
      `SELECT id, model, voice, characters, cost_micro_eur, response_format, audio_storage_key, audio_content_type,
              (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms FROM speech_requests WHERE batch_id = $1`,
      [f.batch_id],
    );
    const spoken = new Map(speech.rows.map((s) => [s.id, s]));
    const lines: string[] = [];
    for (const i of items.rows) {
      const job = jobs.get(i.request_id);
      const s = spoken.get(i.request_id);
      const body = i.kind === 'video' ? job && (await present.video(job)) : s && (await present.speech(s));
      lines.push(
        JSON.stringify({ id: i.request_id, custom_id: i.custom_id, response: { status_code: 200, body: body ?? null }, error: null }) +
          '\n',
      );
    }
    return lines.join('');
  }
}
