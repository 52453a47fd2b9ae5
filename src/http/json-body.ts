// JSON bodies: application/json only (415 otherwise), at most JSON_BODY_LIMIT_BYTES (413).
import express, { type RequestHandler } from 'express';
import { ApiError } from './errors.js';

export const JSON_BODY_LIMIT_BYTES = 64 * 1024;

const parser = express.json({ limit: JSON_BODY_LIMIT_BYTES, strict: true });

export const jsonBody: RequestHandler = (req, res, next) => {
  if (!req.is('application/json')) {
    return next(new ApiError(415, 'invalid_request_error', 'unsupported_media_type', 'send the request body as application/json'));
  }
  parser(req, res, (err?: unknown) => {
    if (err) return next(err);
    if (typeof req.body !== 'object' || req.body === null || Array.isArray(req.body)) {
      return next(new ApiError(400, 'invalid_request_error', 'invalid_json', 'the request body must be a JSON object'));
    }
    next();
  });
};
