// The models on the OpenAI-compatible surface (/v1), in the shape of OpenAI's Models API.
import { z } from 'zod';
import { UnixSeconds } from '../http/schemas.js';

export const OpenAiModel = z
  .strictObject({
    id: z.string(),
    object: z.literal('model'),
    created: UnixSeconds.describe("Unix time (seconds); the catalog has no dates, so every model reports this service's first release."),
    owned_by: z.string(),
  })
  .describe('A video or speech model this API key may use and something here serves.');
export const OpenAiModelList = z.strictObject({ object: z.literal('list'), data: z.array(OpenAiModel) });

export const OPENAI_RESPONSE_COMPONENTS = { OpenAiModel, OpenAiModelList } satisfies Record<string, z.ZodType>;
