// "Record": a voice sample from the microphone, where the browser offers one (MediaRecorder and
// getUserMedia, which need a secure context such as https or localhost). The recording is handed
// over as a File, like a chosen one.
import { useEffect, useRef, useState } from 'react';
import Button from 'react-bootstrap/Button';

export const canRecord = () => typeof MediaRecorder !== 'undefined' && typeof navigator.mediaDevices?.getUserMedia === 'function';

const extensionOf = (mime: string) => (mime.includes('ogg') ? 'ogg' : mime.includes('mp4') ? 'm4a' : 'webm');

export function Recorder({ onRecorded, onError }: { onRecorded: (file: File) => void; onError: (e: unknown) => void }) {
  const [recorder, setRecorder] = useState<MediaRecorder | null>(null);
  const [started, setStarted] = useState(0);
  const [elapsed_s, setElapsed] = useState(0);
  const streamRef = useRef<MediaStream | null>(null);

  useEffect(() => {
    if (!recorder) return;
    const timer = setInterval(() => setElapsed(Math.floor((Date.now() - started) / 1000)), 500);
    return () => clearInterval(timer);
  }, [recorder, started]);
  // Leaving the screen mid-recording releases the microphone.
  useEffect(() => () => streamRef.current?.getTracks().forEach((t) => t.stop()), []);

  async function start() {
    try {
      const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
      streamRef.current = stream;
      const rec = new MediaRecorder(stream);
      const chunks: Blob[] = [];
      rec.ondataavailable = (e) => chunks.push(e.data);
      rec.onstop = () => {
        stream.getTracks().forEach((t) => t.stop());
        const type = rec.mimeType || 'audio/webm';
        onRecorded(new File(chunks, `recording.${extensionOf(type)}`, { type }));
        setRecorder(null);
      };
      rec.start();
      setStarted(Date.now());
      setElapsed(0);
      setRecorder(rec);
    } catch (err) {
      onError(new Error(`the microphone could not be used (${(err as Error).message})`));
    }
  }

  return recorder ? (
    <Button variant="danger" onClick={() => recorder.stop()}>
      Stop recording ({elapsed_s} s)
    </Button>
  ) : (
    <Button variant="outline-secondary" onClick={start}>
      Record
    </Button>
  );
}
