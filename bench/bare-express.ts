// Subject (a) of the create benchmark, the HTTP floor: Express with one POST route answering 202 {}.
// It parses the JSON body like the other subjects do, and does nothing else.
import express from 'express';
import { listen } from './listen.js';
import type { RunningSubject } from './subject.js';

export const BARE_CREATE_PATH = '/bare/jobs';

export async function startBareExpress(): Promise<RunningSubject> {
  const app = express();
  app.disable('x-powered-by');
  app.post(BARE_CREATE_PATH, express.json(), (_req, res) => {
    res.status(202).json({});
  });
  const server = await listen(app);
  return { url: server.url, stop: server.close };
}
