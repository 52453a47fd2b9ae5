// What the speech WebSocket (./speech-socket.ts) and its utterances (./speech-utterance.ts) share: the
// client's messages as they are validated, the socket's limits, and what a socket needs to run. Below both,
// so that each utterance knows the messages without knowing the socket.
import { z } from 'zod';
import type { Logger } from 'pino';
import type { Db } from '../db/pool.js';
import type { SpeechTokens } from './speech-tokens.js';
import type { SpeechService } from './speech.js';

export interface SpeechSocketLimits {
  /** Contexts speaking at once on one socket (SPEECH_WS_CONTEXTS_MAX). */
  contexts_per_socket_max: number;
  /** Sockets open at once per API key, per API process (SPEECH_WS_SOCKETS_PER_KEY_MAX). */
  sockets_per_key_max: number;
  /** Characters of one message's text (SPEECH_WS_MESSAGE_CHARS_MAX). */
  message_chars_max: number;
  /** Characters of one context, all its texts together (SPEECH_WS_CONTEXT_CHARS_MAX). */
  context_chars_max: number;
  /** A socket with no message from its client this long, while no context speaks what it was sent, is closed (SPEECH_WS_IDLE_MS). */
  idle_ms: number;
  /** The largest frame accepted, in bytes (SPEECH_WS_FRAME_BYTES_MAX). */
  frame_bytes_max: number;
  /** Bytes waiting to go out to a slow client beyond which the provider is not read (SPEECH_WS_BUFFERED_BYTES_MAX). */
  buffered_bytes_max: number;
}

export const ContextId = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits, _ . : -');

/** A client's message: a text of a context, or its cancellation. */
export const SpeechSocketMessage = z.union([
  z.strictObject({ context_id: ContextId, cancel: z.literal(true) }),
  z.strictObject({
    context_id: ContextId,
    voice: z.string().min(1).max(200).optional(),
    model: z.string().min(1).max(100).optional(),
    text: z.string(),
    continue: z.boolean().optional(),
    flush: z.boolean().optional(),
  }),
]);
export type SpeechSocketMessage = z.output<typeof SpeechSocketMessage>;
export type SpeechTextMessage = Extract<SpeechSocketMessage, { text: string }>;

export interface SpeechSocketDeps {
  db: Db;
  speech: SpeechService;
  tokens: SpeechTokens;
  limits: SpeechSocketLimits;
  logger: Logger;
  /** Failed authentications per client address and minute before upgrades from it are refused unread (429). */
  authFailuresPerMinute?: number;
}
