// Writes a streamed speech (SpeechService.speakStream) to the client, as the audio bytes themselves
// (`stream_format: "audio"`) or as OpenAI's server-sent events (`"sse"`):
//
//   data: {"type": "speech.audio.delta", "audio": "<base64 of the next bytes>"}
//   data: {"type": "speech.word_timestamps", "words": [...], "start_s": [...], "end_s": [...]}  (with timestamps: word)
//   data: {"type": "speech.audio.done", "usage": {"input_tokens", "output_tokens", "total_tokens"}}
//
// A client that goes away is not followed by the provider: the stream is drained so the synthesis
// finishes and is charged (see src/voices/speech.ts). A provider failing midway cuts an audio stream
// (the client sees an incomplete body) or ends an SSE stream with an `error` event.
import type { Response } from 'express';
import type { SpeechStream } from './speech.js';
import type { WordTimestamps } from '../providers/voice/types.js';

export type StreamFormat = 'audio' | 'sse';

export function sendSpeechStream(res: Response, speech: SpeechStream, format: StreamFormat, headers: Record<string, string>): void {
  const { body } = speech;
  res.on('close', () => {
    if (res.writableFinished) return;
    // The client left: read the rest into nothing.
    body.unpipe(res);
    body.removeAllListeners('data');
    body.on('error', () => {});
    body.resume();
  });
  if (format === 'audio') {
    // The headers go out with the first bytes (already in `body`: the stream starts with its first
    // audio), in one write, not one write ahead of them.
    res.status(200).set({ 'Content-Type': speech.content_type, ...headers });
    body.on('error', () => res.destroy());
    body.pipe(res);
    return;
  }
  res.status(200).set({ 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', ...headers });
  res.flushHeaders();
  const event = (data: unknown) => {
    if (!res.destroyed) res.write(`data: ${JSON.stringify(data)}\n\n`);
  };
  body.on('data', (chunk: Buffer | WordTimestamps) =>
    event(
      Buffer.isBuffer(chunk)
        ? { type: 'speech.audio.delta', audio: chunk.toString('base64') }
        : { type: 'speech.word_timestamps', words: chunk.words, start_s: chunk.start_s, end_s: chunk.end_s },
    ),
  );
  body.on('end', () => {
    // Characters stand in for tokens: they are what the request is billed by.
    event({ type: 'speech.audio.done', usage: { input_tokens: speech.characters, output_tokens: 0, total_tokens: speech.characters } });
    res.end();
  });
  body.on('error', () => {
    event({
      type: 'error',
      error: {
        type: 'server_error',
        code: 'provider_failed',
        message: 'the voice provider failed mid-stream; nothing was charged',
        param: null,
      },
    });
    res.end();
  });
}
