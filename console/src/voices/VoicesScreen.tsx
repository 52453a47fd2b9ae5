// Voices: clone one from a file or a recording at one of the configured voice providers, list and delete the
// workspace's voices, and speak a text with a cloned or preset voice (by its provider's model), played inline,
// with what it cost (the X-Cost-In-Euro header).
import { useCallback, useEffect, useState, type FormEvent } from 'react';
import Button from 'react-bootstrap/Button';
import Col from 'react-bootstrap/Col';
import Form from 'react-bootstrap/Form';
import Row from 'react-bootstrap/Row';
import Table from 'react-bootstrap/Table';
import { api, apiRaw, type ListPage, type Model, type SpeechModel, type Voice } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { euros, when } from '../format';
import { canRecord, Recorder } from './Recorder';
import { LiveSpeech } from './LiveSpeech';
import { Panel, useAction } from '../ui';

function CloneVoice({ providers, onCloned }: { providers: string[]; onCloned: () => void }) {
  const [name, setName] = useState('');
  const [provider, setProvider] = useState('');
  const chosenProvider = providers.includes(provider) ? provider : (providers[0] ?? '');
  const [sample, setSample] = useState<File | null>(null);
  const [recording, setRecording] = useState<{ file: File; url: string } | null>(null);
  const [fileInputKey, setFileInputKey] = useState(0);
  const { busy, error, setError, run } = useAction();
  useEffect(() => () => (recording ? URL.revokeObjectURL(recording.url) : undefined), [recording]);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const file = recording?.file ?? sample;
      if (!file) throw new Error('choose a voice sample file or record one');
      const form = new FormData();
      form.append('name', name);
      form.append('file', file, file.name);
      if (chosenProvider) form.append('provider', chosenProvider);
      await api<Voice>('/v2/audio/voices', { method: 'POST', form });
      setName('');
      setSample(null);
      setRecording(null);
      setFileInputKey((k) => k + 1);
      onCloned();
    });
  };

  return (
    <Panel id="clone" title="Clone a voice" className="mb-4">
      <Form onSubmit={submit}>
        <Form.Group className="mb-3" controlId="voice-name">
          <Form.Label>Voice name</Form.Label>
          <Form.Control required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} />
        </Form.Group>
        {providers.length > 0 && (
          <Form.Group className="mb-3" controlId="voice-provider">
            <Form.Label>Provider</Form.Label>
            <Form.Select value={chosenProvider} onChange={(e) => setProvider(e.target.value)} aria-describedby="voice-provider-help">
              {providers.map((p) => (
                <option key={p}>{p}</option>
              ))}
            </Form.Select>
            <Form.Text id="voice-provider-help">The voice provider that clones the voice, and then always speaks it.</Form.Text>
          </Form.Group>
        )}
        <Form.Group className="mb-3" controlId="voice-sample">
          <Form.Label>Voice sample</Form.Label>
          <Form.Control
            key={fileInputKey}
            type="file"
            accept="audio/*"
            onChange={(e) => setSample((e.target as HTMLInputElement).files?.[0] ?? null)}
            aria-describedby="voice-sample-help"
          />
          <Form.Text id="voice-sample-help">A recording of the voice (WAV, MP3, FLAC, Ogg, M4A or WebM), up to 10 MiB.</Form.Text>
        </Form.Group>
        {canRecord() && (
          <div className="mb-3 d-flex flex-wrap align-items-center gap-2">
            <Recorder onRecorded={(file) => setRecording({ file, url: URL.createObjectURL(file) })} onError={setError} />
            {recording && (
              <>
                <audio controls src={recording.url} aria-label="Your recording" />
                <Button variant="link" size="sm" onClick={() => setRecording(null)}>
                  Discard recording
                </Button>
              </>
            )}
          </div>
        )}
        <ErrorAlert error={error} />
        <Button type="submit" disabled={busy}>
          Clone voice
        </Button>
      </Form>
    </Panel>
  );
}

function VoiceList({ voices, onChange }: { voices: Voice[]; onChange: () => void }) {
  const [error, setError] = useState<unknown>(null);
  async function remove(v: Voice) {
    setError(null);
    try {
      await api(`/v2/audio/voices/${v.id}`, { method: 'DELETE' });
      onChange();
    } catch (err) {
      setError(err);
    }
  }
  return (
    <section aria-labelledby="voices-heading" className="mb-4">
      <h2 id="voices-heading" className="h5">
        Your voices
      </h2>
      <ErrorAlert error={error} />
      {voices.length === 0 ? (
        <p className="text-body-secondary">No cloned voices yet.</p>
      ) : (
        <Table responsive size="sm" className="align-middle">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Voice id</th>
              <th scope="col">Provider</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {voices.map((v) => (
              <tr key={v.id} aria-label={`Voice ${v.name}`}>
                <td>{v.name}</td>
                <td className="font-monospace small text-break">{v.voice_id}</td>
                <td className="small">{v.provider}</td>
                <td className="small">{when(v.created)}</td>
                <td className="text-end">
                  <Button size="sm" variant="outline-danger" onClick={() => remove(v)}>
                    Delete
                  </Button>
                </td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
    </section>
  );
}

function Speak({ voices, models }: { voices: Voice[]; models: SpeechModel[] }) {
  // Each configured provider's preset voices, from its first model (the one a request without `model` gets).
  const defaults = models.filter((m, i) => models.findIndex((x) => x.backend === m.backend) === i);
  const presets = defaults.flatMap((m) => m.preset_voices);
  const [text, setText] = useState('Hello from the console.');
  const [voice, setVoice] = useState('');
  const [result, setResult] = useState<{ url: string; cost_in_euro: number; characters: number } | null>(null);
  const { busy, error, run } = useAction();
  const choices = [...voices.map((v) => v.voice_id), ...presets];
  const chosen = choices.includes(voice) ? voice : (choices[0] ?? '');
  // The voice's provider speaks it, with its default model (whose price is shown).
  const provider = voices.find((v) => v.voice_id === chosen)?.provider ?? defaults.find((m) => m.preset_voices.includes(chosen))?.backend;
  const model = defaults.find((m) => m.backend === provider) ?? defaults[0];
  useEffect(() => () => (result ? URL.revokeObjectURL(result.url) : undefined), [result]);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const res = await apiRaw('/v2/audio/speech', {
        method: 'POST',
        json: { input: text, voice: chosen },
        idempotencyKey: crypto.randomUUID(),
      });
      const audio = await res.blob();
      setResult({
        url: URL.createObjectURL(audio),
        cost_in_euro: Number(res.headers.get('X-Cost-In-Euro')),
        characters: Number(res.headers.get('X-Characters')),
      });
    });
  };

  return (
    <Panel id="speak" title="Speak">
      <Form onSubmit={submit}>
        <Form.Group className="mb-3" controlId="speech-text">
          <Form.Label>Text</Form.Label>
          <Form.Control
            as="textarea"
            rows={3}
            required
            maxLength={model?.max_input_chars}
            value={text}
            onChange={(e) => setText(e.target.value)}
            aria-describedby="speech-price"
          />
          {model && (
            <Form.Text id="speech-price">
              {euros(model.pricing.per_1000_characters_in_euro)} per 1,000 characters: this text costs{' '}
              {euros((model.pricing.per_1000_characters_in_euro * [...text].length) / 1000)}, charged once the audio is delivered.
            </Form.Text>
          )}
        </Form.Group>
        <Form.Group className="mb-3" controlId="speech-voice">
          <Form.Label>Voice</Form.Label>
          <Form.Select value={chosen} onChange={(e) => setVoice(e.target.value)}>
            {voices.length > 0 && (
              <optgroup label="Your voices">
                {voices.map((v) => (
                  <option key={v.id} value={v.voice_id}>
                    {v.name} ({v.voice_id})
                  </option>
                ))}
              </optgroup>
            )}
            {presets.length > 0 && (
              <optgroup label="Preset voices">
                {presets.map((p) => (
                  <option key={p}>{p}</option>
                ))}
              </optgroup>
            )}
          </Form.Select>
        </Form.Group>
        <ErrorAlert error={error} />
        <Button type="submit" disabled={busy || chosen === ''}>
          Speak
        </Button>
      </Form>
      <LiveSpeech text={text} voice={chosen} />
      {result && (
        <div className="mt-3">
          <audio controls autoPlay src={result.url} className="w-100" aria-label="Speech" />
          <p className="mb-0 small" role="status">
            Cost: <strong className="speech-cost">{euros(result.cost_in_euro)}</strong> for {result.characters} characters.
          </p>
        </div>
      )}
    </Panel>
  );
}

export function VoicesScreen() {
  const [voices, setVoices] = useState<Voice[]>([]);
  const [models, setModels] = useState<SpeechModel[]>([]);
  const [error, setError] = useState<unknown>(null);
  const load = useCallback(() => {
    api<ListPage<Voice>>('/v2/audio/voices').then((page) => {
      setVoices(page.data);
      setError(null);
    }, setError);
  }, []);
  useEffect(() => {
    load();
    api<ListPage<Model>>('/v2/models').then(
      (page) => setModels(page.data.filter((m): m is SpeechModel => m.kind === 'speech' && m.available)),
      setError,
    );
  }, [load]);

  return (
    <Row className="g-4">
      <Col lg={6}>
        <ErrorAlert error={error} />
        <CloneVoice providers={[...new Set(models.map((m) => m.backend).filter((b) => b !== null))]} onCloned={load} />
        <VoiceList voices={voices} onChange={load} />
      </Col>
      <Col lg={6}>
        <Speak voices={voices} models={models} />
      </Col>
    </Row>
  );
}
