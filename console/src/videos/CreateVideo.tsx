// The form that creates a video job: every choice the key's model allows, limited to what that model
// takes (first and last frame, audio, negative prompt), and the price of exactly what is chosen,
// computed from the model's published prices before anything is spent.
import { useEffect, useMemo, useState, type FormEvent } from 'react';
import Button from 'react-bootstrap/Button';
import Col from 'react-bootstrap/Col';
import Form from 'react-bootstrap/Form';
import Row from 'react-bootstrap/Row';
import { api, type VideoJob, type VideoModel } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { euros, fromMicroEur, microEur } from '../format';
import { Panel, useAction } from '../ui';

/** The price of a choice, in exact micro-euros: price per second x seconds x videos. */
export function priceOf(model: VideoModel, choice: { resolution: string; durationSeconds: number; n: number; audio: boolean }) {
  const table =
    choice.audio && model.pricing.per_second_with_audio_in_euro
      ? model.pricing.per_second_with_audio_in_euro
      : model.pricing.per_second_without_audio_in_euro;
  const perSecond = table[choice.resolution];
  if (perSecond === undefined) return null;
  return { per_second_in_euro: perSecond, total_micro_eur: microEur(perSecond) * choice.durationSeconds * choice.n };
}

/** Whether the model has a separate price with audio, so that "Audio" is a choice with a cost. */
const pricesAudio = (m: VideoModel) => m.supports_audio && m.pricing.per_second_with_audio_in_euro !== null;

function limitsOf(m: VideoModel): string {
  const parts = [
    `${m.durations_seconds.join(', ')} s`,
    m.resolutions.join(', '),
    m.aspect_ratios.join(', '),
    `up to ${m.max_n} video${m.max_n > 1 ? 's' : ''}`,
  ];
  return parts.join(' · ');
}

const keepOr = <T,>(value: T, allowed: readonly T[]): T => (allowed.includes(value) ? value : allowed[0]!);

async function imageField(file: File): Promise<{ bytesBase64Encoded: string; mimeType: string }> {
  const dataUrl = await new Promise<string>((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error ?? new Error(`could not read ${file.name}`));
    reader.readAsDataURL(file);
  });
  return { bytesBase64Encoded: dataUrl.slice(dataUrl.indexOf(',') + 1), mimeType: file.type };
}

export function CreateVideo({ models, onCreated }: { models: VideoModel[]; onCreated: (job: VideoJob) => void }) {
  const [modelId, setModelId] = useState(models[0]?.id ?? '');
  const model = models.find((m) => m.id === modelId) ?? models[0];
  const [prompt, setPrompt] = useState('A lighthouse at dusk, waves rolling in, the lamp turning on');
  const [durationSeconds, setDuration] = useState(model?.durations_seconds[0] ?? 0);
  const [resolution, setResolution] = useState(model?.resolutions[0] ?? '');
  const [aspectRatio, setAspectRatio] = useState(model?.aspect_ratios[0] ?? '');
  const [n, setN] = useState(1);
  const [audio, setAudio] = useState(model?.generate_audio_default ?? false);
  const [negativePrompt, setNegativePrompt] = useState('');
  const [firstFrame, setFirstFrame] = useState<File | null>(null);
  const [lastFrame, setLastFrame] = useState<File | null>(null);
  const [simulate, setSimulate] = useState('');
  const { busy, error, run } = useAction();

  // A new model keeps each choice it allows and takes its first option for the others.
  useEffect(() => {
    if (!model) return;
    setDuration((d) => keepOr(d, model.durations_seconds));
    setResolution((r) => keepOr(r, model.resolutions));
    setAspectRatio((a) => keepOr(a, model.aspect_ratios));
    setN((x) => Math.min(x, model.max_n));
    setAudio(model.generate_audio_default);
  }, [model]);

  const price = useMemo(
    () => (model ? priceOf(model, { resolution, durationSeconds, n, audio: audio && pricesAudio(model) }) : null),
    [model, resolution, durationSeconds, n, audio],
  );

  if (!model) return <p>This API key may not use any video model.</p>;

  const tooBig = (f: File | null) => f !== null && f.size > model.max_image_bytes;

  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      if (lastFrame && !firstFrame) throw new Error('a last frame needs a first frame');
      for (const f of [firstFrame, lastFrame])
        if (tooBig(f)) throw new Error(`${f!.name} is larger than ${model.max_image_bytes / 1024 / 1024} MiB`);
      let parameters: Record<string, unknown> | undefined;
      if (model.family === 'simulator' && simulate.trim() !== '') {
        try {
          parameters = { simulate: JSON.parse(simulate) as unknown };
        } catch {
          throw new Error('Simulator parameters must be a JSON object, e.g. {"videos": 1}');
        }
      }
      const body: Record<string, unknown> = { prompt, model: model.id, durationSeconds, resolution, aspectRatio, n };
      if (pricesAudio(model)) body['generateAudio'] = audio;
      if (model.supports_negative_prompt && negativePrompt.trim() !== '') body['negativePrompt'] = negativePrompt;
      if (model.supports_image && firstFrame) body['image'] = await imageField(firstFrame);
      if (model.supports_last_frame && lastFrame) body['lastFrame'] = await imageField(lastFrame);
      if (parameters) body['parameters'] = parameters;
      const job = await api<VideoJob>('/v2/videos/generations', { method: 'POST', json: body, idempotencyKey: crypto.randomUUID() });
      onCreated(job);
    });
  };

  const accept = model.image_mime_types.join(',');
  return (
    <Panel id="create" title="New video">
      <Form onSubmit={submit}>
        <Form.Group className="mb-3" controlId="prompt">
          <Form.Label>Prompt</Form.Label>
          <Form.Control as="textarea" rows={3} required maxLength={4000} value={prompt} onChange={(e) => setPrompt(e.target.value)} />
        </Form.Group>
        <Form.Group className="mb-3" controlId="model">
          <Form.Label>Model</Form.Label>
          <Form.Select value={model.id} onChange={(e) => setModelId(e.target.value)} aria-describedby="model-limits">
            {models.map((m) => (
              <option key={m.id} value={m.id}>
                {m.id}
                {m.simulated ? ' (simulated)' : ''}
              </option>
            ))}
          </Form.Select>
          <Form.Text id="model-limits">Limits: {limitsOf(model)}</Form.Text>
        </Form.Group>
        <Row xs={2} className="g-2 mb-3">
          <Form.Group as={Col} controlId="duration">
            <Form.Label>Duration</Form.Label>
            <Form.Select value={durationSeconds} onChange={(e) => setDuration(Number(e.target.value))}>
              {model.durations_seconds.map((d) => (
                <option key={d} value={d}>
                  {d} s
                </option>
              ))}
            </Form.Select>
          </Form.Group>
          <Form.Group as={Col} controlId="resolution">
            <Form.Label>Resolution</Form.Label>
            <Form.Select value={resolution} onChange={(e) => setResolution(e.target.value)}>
              {model.resolutions.map((r) => (
                <option key={r}>{r}</option>
              ))}
            </Form.Select>
          </Form.Group>
          <Form.Group as={Col} controlId="aspect-ratio">
            <Form.Label>Aspect ratio</Form.Label>
            <Form.Select value={aspectRatio} onChange={(e) => setAspectRatio(e.target.value)}>
              {model.aspect_ratios.map((a) => (
                <option key={a}>{a}</option>
              ))}
            </Form.Select>
          </Form.Group>
          <Form.Group as={Col} controlId="n">
            <Form.Label>Number of videos</Form.Label>
            <Form.Select value={n} onChange={(e) => setN(Number(e.target.value))}>
              {Array.from({ length: model.max_n }, (_, i) => i + 1).map((k) => (
                <option key={k}>{k}</option>
              ))}
            </Form.Select>
          </Form.Group>
        </Row>
        {pricesAudio(model) && (
          <Form.Group className="mb-3" controlId="audio">
            <Form.Check type="switch" label="Audio" checked={audio} onChange={(e) => setAudio(e.target.checked)} />
          </Form.Group>
        )}
        {(model.supports_image || model.supports_last_frame) && (
          <Row xs={1} className="g-2 mb-3">
            {model.supports_image && (
              <Form.Group as={Col} controlId="first-frame">
                <Form.Label>First frame</Form.Label>
                <Form.Control
                  type="file"
                  accept={accept}
                  onChange={(e) => setFirstFrame((e.target as HTMLInputElement).files?.[0] ?? null)}
                />
              </Form.Group>
            )}
            {model.supports_last_frame && (
              <Form.Group as={Col} controlId="last-frame">
                <Form.Label>Last frame</Form.Label>
                <Form.Control
                  type="file"
                  accept={accept}
                  onChange={(e) => setLastFrame((e.target as HTMLInputElement).files?.[0] ?? null)}
                />
              </Form.Group>
            )}
          </Row>
        )}
        {model.supports_negative_prompt && (
          <Form.Group className="mb-3" controlId="negative-prompt">
            <Form.Label>Negative prompt</Form.Label>
            <Form.Control
              maxLength={1000}
              value={negativePrompt}
              onChange={(e) => setNegativePrompt(e.target.value)}
              placeholder="what the video should not show"
            />
          </Form.Group>
        )}
        {model.family === 'simulator' && (
          <Form.Group className="mb-3" controlId="simulate">
            <Form.Label>Simulator parameters (JSON)</Form.Label>
            <Form.Control
              value={simulate}
              onChange={(e) => setSimulate(e.target.value)}
              placeholder='optional, e.g. {"videos": 1} or {"outcome": "fail"}'
              aria-describedby="simulate-help"
            />
            <Form.Text id="simulate-help">
              Sent as parameters.simulate: how the simulated provider behaves (videos delivered, outcome, delay_ms).
            </Form.Text>
          </Form.Group>
        )}
        <div className="d-flex flex-wrap align-items-center gap-3">
          <Button type="submit" disabled={busy}>
            Generate
          </Button>
          <div>
            <label htmlFor="price" className="me-2">
              Price
            </label>
            <output id="price" htmlFor="model duration resolution n audio" className="fw-bold fs-5" aria-live="polite">
              {price ? euros(fromMicroEur(price.total_micro_eur)) : '-'}
            </output>
            {price && (
              <span className="ms-2 small text-body-secondary">
                ({euros(price.per_second_in_euro)}/s × {durationSeconds} s × {n})
              </span>
            )}
          </div>
        </div>
        <div className="mt-3">
          <ErrorAlert error={error} />
        </div>
      </Form>
    </Panel>
  );
}
