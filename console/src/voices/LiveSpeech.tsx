// Speak live: the text spoken over the speech WebSocket (GET /v2/audio/speech/stream), opened with a
// short-lived token (POST /v2/audio/speech/tokens: a browser cannot send the key as a header there), its
// audio played as it arrives (Web Audio: each frame of 16-bit PCM scheduled right after the one before)
// and its words highlighted as their timestamps come due on the audio clock.
import { useEffect, useRef, useState, type FormEvent } from 'react';
import Button from 'react-bootstrap/Button';
import Form from 'react-bootstrap/Form';
import { api, type SpeechToken } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { euros } from '../format';
import { useAction } from '../ui';

interface TimedWord {
  word: string;
  start_s: number;
  end_s: number;
}

interface Spoken {
  words: TimedWord[];
  frames: number;
  done: { characters: number; cost_in_euro: number } | null;
}

/** 16-bit little-endian PCM (base64) as the samples Web Audio plays. */
function samplesOf(base64: string): Float32Array<ArrayBuffer> {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  const out = new Float32Array(bytes.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt16(i * 2, true) / 32768;
  return out;
}

export function LiveSpeech({ text, voice }: { text: string; voice: string }) {
  const [spoken, setSpoken] = useState<Spoken | null>(null);
  const [now_s, setNow] = useState(0);
  const { busy, error, run } = useAction();
  const audio = useRef<{ ctx: AudioContext; start: number; next: number } | null>(null);

  // The audio clock, read each frame while something is spoken, for the highlighting.
  useEffect(() => {
    let frame = 0;
    const tick = () => {
      const a = audio.current;
      if (a) setNow(a.ctx.currentTime - a.start);
      frame = requestAnimationFrame(tick);
    };
    frame = requestAnimationFrame(tick);
    return () => cancelAnimationFrame(frame);
  }, []);
  useEffect(() => () => void audio.current?.ctx.close(), []);

  const play = (pcm: Float32Array<ArrayBuffer>, rate_hz: number) => {
    const a = audio.current!;
    const buffer = a.ctx.createBuffer(1, pcm.length, rate_hz);
    buffer.copyToChannel(pcm, 0);
    const source = a.ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(a.ctx.destination);
    const at = Math.max(a.next, a.ctx.currentTime);
    source.start(at);
    a.next = at + buffer.duration;
  };

  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const t = await api<SpeechToken>('/v2/audio/speech/tokens', { method: 'POST' });
      await audio.current?.ctx.close();
      const ctx = new AudioContext();
      await ctx.resume();
      audio.current = { ctx, start: ctx.currentTime + 0.1, next: ctx.currentTime + 0.1 };
      setSpoken({ words: [], frames: 0, done: null });
      const url = `${location.origin.replace(/^http/, 'ws')}${t.url_path}?token=${encodeURIComponent(t.token)}`;
      await new Promise<void>((resolve, reject) => {
        const ws = new WebSocket(url);
        let rate_hz = 22_050;
        ws.onopen = () => ws.send(JSON.stringify({ context_id: 'console', voice, text }));
        ws.onerror = () => reject(new Error('the speech socket could not be opened'));
        ws.onmessage = (m: MessageEvent<string>) => {
          const msg = JSON.parse(m.data) as Record<string, unknown>;
          if (msg['type'] === 'context') rate_hz = Number(msg['sample_rate_hz']);
          else if (msg['type'] === 'audio') {
            play(samplesOf(String(msg['audio'])), rate_hz);
            setSpoken((s) => s && { ...s, frames: s.frames + 1 });
          } else if (msg['type'] === 'word_timestamps') {
            const w = msg as unknown as { words: string[]; start_s: number[]; end_s: number[] };
            const timed = w.words.map((word, i) => ({ word, start_s: w.start_s[i]!, end_s: w.end_s[i]! }));
            setSpoken((s) => s && { ...s, words: [...s.words, ...timed] });
          } else if (msg['type'] === 'error') reject(new Error(String(msg['message'])));
          else if (msg['type'] === 'done') {
            const done = { characters: Number(msg['characters']), cost_in_euro: Number(msg['cost_in_euro']) };
            setSpoken((s) => s && { ...s, done });
            ws.close();
            resolve();
          }
        };
      });
    });
  };

  return (
    <Form onSubmit={submit} className="mt-3">
      <ErrorAlert error={error} />
      <Button type="submit" variant="outline-primary" disabled={busy || voice === '' || text.trim() === ''}>
        Speak live
      </Button>
      {spoken && (
        <div className="mt-3">
          <p className="live-words" aria-label="Words as they are spoken">
            {spoken.words.map((w, i) => (
              <span key={i} className={now_s >= w.start_s ? 'live-word live-word-spoken' : 'live-word'}>
                {w.word}{' '}
              </span>
            ))}
          </p>
          <p className="mb-0 small" role="status" data-frames={spoken.frames}>
            {spoken.frames} audio frames
            {spoken.done && (
              <>
                {' '}
                · cost <strong className="live-cost">{euros(spoken.done.cost_in_euro)}</strong> for {spoken.done.characters} characters
              </>
            )}
          </p>
        </div>
      )}
    </Form>
  );
}
