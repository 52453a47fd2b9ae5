// The optional inputs of a video request (image, lastFrame, generateAudio, negativePrompt), checked
// against what the model's catalog entry supports: a field the model does not take is a 400 naming it,
// an image is recognised by its content (400 when it is not a PNG, JPEG or WebP image of a type the
// model takes, or not the declared type) and is at most IMAGE_BYTES_MAX decoded (413 beyond).
import { createHash } from 'node:crypto';
import type { VideoModel } from '../models/catalog.js';
import { ApiError, invalidParam } from '../errors.js';
import { IMAGE_BYTES_MAX, type CreateVideoBody } from './schemas.js';
import { sniffImage } from '../media/image-sniff.js';
import type { InputImage } from '../providers/video/types.js';

export interface VideoRequestInputs {
  /** Set for models with audio: the request's choice, else the model's default. It decides the price. */
  generate_audio: boolean | undefined;
  negative_prompt: string | undefined;
  image: InputImage | undefined;
  last_frame: InputImage | undefined;
}

const unsupported = (param: string, model: VideoModel, what: string) =>
  invalidParam(param, `model ${model.id} does not take ${what}; see its capabilities in GET /v2/models`, 'unsupported_parameter');

export function resolveVideoRequestInputs(model: VideoModel, body: CreateVideoBody): VideoRequestInputs {
  if (body.image !== undefined && !model.inputs.image) throw unsupported('image', model, 'an image (first frame)');
  if (body.lastFrame !== undefined) {
    if (!model.inputs.last_frame) throw unsupported('lastFrame', model, 'a last frame');
    if (body.image === undefined) throw invalidParam('lastFrame', 'lastFrame needs image: a last frame goes with a first frame');
  }
  if (body.generateAudio !== undefined && !model.audio.supported)
    throw unsupported('generateAudio', model, 'generateAudio (it has no audio)');
  if (body.negativePrompt !== undefined && !model.inputs.negative_prompt) throw unsupported('negativePrompt', model, 'a negative prompt');
  return {
    generate_audio: model.audio.supported ? (body.generateAudio ?? model.audio.default) : undefined,
    negative_prompt: body.negativePrompt,
    image: body.image ? decodeImage(model, 'image', body.image) : undefined,
    last_frame: body.lastFrame ? decodeImage(model, 'lastFrame', body.lastFrame) : undefined,
  };
}

function decodeImage(model: VideoModel, field: string, input: { bytesBase64Encoded: string; mimeType: string }): InputImage {
  const b64 = input.bytesBase64Encoded; // standard base64 with padding (checked by the schema)
  const padding = b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0;
  const size = (b64.length / 4) * 3 - padding;
  if (size > IMAGE_BYTES_MAX) {
    throw new ApiError(
      413,
      'invalid_request_error',
      'image_too_large',
      `${field} has ${size} bytes; at most ${IMAGE_BYTES_MAX} are accepted`,
      `${field}.bytesBase64Encoded`,
    );
  }
  const bytes = Buffer.from(b64, 'base64');
  const type = sniffImage(bytes);
  if (!type) throw invalidParam(`${field}.bytesBase64Encoded`, `${field} is not a PNG, JPEG or WebP image`, 'unsupported_image');
  if (type !== input.mimeType) throw invalidParam(`${field}.mimeType`, `${field}.mimeType is ${input.mimeType}, but the image is ${type}`);
  if (!model.inputs.image_mime_types.includes(type)) {
    throw invalidParam(
      `${field}.mimeType`,
      `model ${model.id} takes ${model.inputs.image_mime_types.join(', ')} images, not ${type}`,
      'unsupported_image',
    );
  }
  return { bytes, mime_type: type };
}

/**
 * What the optional inputs add to a request's fingerprint (an Idempotency-Key reused with another body
 * is refused): nothing when none is given, so requests without them keep the fingerprint they had.
 * Images count by their SHA-256.
 */
export function inputsFingerprint(body: CreateVideoBody, inputs: VideoRequestInputs): unknown[] {
  if (body.generateAudio === undefined && !inputs.negative_prompt && !inputs.image && !inputs.last_frame) return [];
  const digest = (image: InputImage | undefined) => (image ? createHash('sha256').update(image.bytes).digest('hex') : null);
  return [
    {
      generateAudio: body.generateAudio ?? null,
      negativePrompt: inputs.negative_prompt ?? null,
      image: digest(inputs.image),
      lastFrame: digest(inputs.last_frame),
    },
  ];
}
