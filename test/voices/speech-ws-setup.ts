// What the speech WebSocket tests share: a client that opens GET /v2/audio/speech/stream as a program
// does (the `ws` library), keeps every message the server sent, and waits for what a test expects.
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import type { Stack } from '../helpers/stack.js';

export interface ServerMessage {
  type: 'context' | 'audio' | 'word_timestamps' | 'done' | 'error';
  context_id: string | null;
  [k: string]: any;
}

export interface SpeechClient {
  ws: WebSocket;
  messages: ServerMessage[];
  send(message: object): void;
  /** Resolves with the first message (from the start of the socket) that `match` accepts. */
  next(match: (m: ServerMessage) => boolean, timeout_ms?: number): Promise<ServerMessage>;
  done(context_id: string, timeout_ms?: number): Promise<ServerMessage>;
  /** The context's audio so far, its base64 frames decoded and joined. */
  audio(context_id: string): Buffer;
  closed: Promise<{ code: number; reason: string }>;
  close(): void;
}

export const wsUrl = (stack: Pick<Stack, 'baseUrl'>, query = '') =>
  `${stack.baseUrl.replace(/^http/, 'ws')}/v2/audio/speech/stream${query}`;

/** Opens the socket (with `key` as the bearer, or the URL's token) and resolves once it is open. */
export async function connect(url: string, key?: string): Promise<SpeechClient> {
  const ws = new WebSocket(url, key ? { headers: { authorization: `Bearer ${key}` } } : {});
  const messages: ServerMessage[] = [];
  const waiters = new Set<() => void>();
  ws.on('message', (data) => {
    messages.push(JSON.parse(data.toString()) as ServerMessage);
    for (const w of waiters) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => {
      resolve({ code, reason: reason.toString() });
      for (const w of waiters) w();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  const next = (match: (m: ServerMessage) => boolean, timeout_ms = 15_000) =>
    new Promise<ServerMessage>((resolve, reject) => {
      const look = () => {
        const found = messages.find(match);
        if (found) {
          waiters.delete(look);
          clearTimeout(timer);
          resolve(found);
        } else if (ws.readyState === WebSocket.CLOSED) {
          waiters.delete(look);
          clearTimeout(timer);
          reject(new Error(`socket closed before the message came: ${JSON.stringify(messages.filter((m) => m.type !== 'audio'))}`));
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(look);
        reject(new Error(`timed out; messages: ${JSON.stringify(messages.filter((m) => m.type !== 'audio'))}`));
      }, timeout_ms);
      waiters.add(look);
      look();
    });
  return {
    ws,
    messages,
    send: (m) => ws.send(JSON.stringify(m)),
    next,
    done: (context_id, timeout_ms) => next((m) => m.type === 'done' && m.context_id === context_id, timeout_ms),
    audio: (context_id) =>
      Buffer.concat(
        messages.filter((m) => m.type === 'audio' && m.context_id === context_id).map((m) => Buffer.from(m['audio'], 'base64')),
      ),
    closed,
    close: () => ws.close(),
  };
}

/** The status with which an upgrade is refused, and its error body. */
export async function refusedUpgrade(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const ws = new WebSocket(url, { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => reject(new Error('the upgrade was accepted')));
    ws.once('error', () => {});
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null }));
    });
  });
}

/** The workspace's speech requests, oldest first, with their ledger charges. */
export async function speechRows(stack: Stack, workspaceId: string) {
  const r = await stack.db.query<{
    id: string;
    status: string;
    characters: number;
    cost_micro_eur: number;
    spoken_characters: number | null;
    /** The audio's bytes as recorded (the settlement's, once settled). */
    audio_bytes: number | null;
    charged_micro_eur: number;
    charges: number;
  }>(
    `SELECT s.id, s.status, s.characters, s.cost_micro_eur, s.spoken_characters, s.audio_bytes,
            COALESCE(-SUM(l.amount_micro_eur), 0)::bigint AS charged_micro_eur, count(l.id)::int AS charges
       FROM speech_requests s LEFT JOIN ledger_entries l ON l.speech_request_id = s.id
      WHERE s.workspace_id = $1 GROUP BY s.id ORDER BY s.created_at, s.id`,
    [workspaceId],
  );
  return r.rows.map((row) => ({ ...row, cost_micro_eur: Number(row.cost_micro_eur), charged_micro_eur: Number(row.charged_micro_eur) }));
}

export async function heldMicro(stack: Stack, workspaceId: string): Promise<number> {
  const r = await stack.db.query<{ held: string }>('SELECT held_micro_eur AS held FROM workspaces WHERE id = $1', [workspaceId]);
  return Number(r.rows[0]!.held);
}

/** The error message the server sent about `context_id` with `code`. */
export const errorOf = (c: SpeechClient, context_id: string | null, code: string) =>
  c.next((m) => m.type === 'error' && m.context_id === context_id && m['code'] === code);

export const assertNoError = (c: SpeechClient) =>
  assert.deepEqual(
    c.messages.filter((m) => m.type === 'error'),
    [],
  );
