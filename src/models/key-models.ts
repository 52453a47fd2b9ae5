// Which models an API key may use (a key lists them, or none: all). Beside the catalog, since a key that
// lists a retired model id may use the model that replaced it.
import { ApiError } from '../errors.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';
import { findVideoModel } from './catalog.js';

/** Whether the key may use a model; a key listing a retired id may use its replacement. */
export function keyAllowsModel(principal: ApiKeyPrincipal, modelId: string): boolean {
  return principal.models === null || principal.models.some((m) => m === modelId || findVideoModel(m)?.id === modelId);
}

/** The 403 of a request naming a model its key may not use (`param: model`); nothing when it may. */
export function requireKeyAllowsModel(principal: ApiKeyPrincipal, modelId: string): void {
  if (!keyAllowsModel(principal, modelId))
    throw new ApiError(403, 'permission_error', 'model_not_permitted', `this API key is not permitted to use model "${modelId}"`, 'model');
}
