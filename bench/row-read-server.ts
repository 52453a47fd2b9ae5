// The floor of a status read (phase 6): Express with the product's API key lookup, then the read of
// the job's row in the product's database (two queries; the product's GET makes them one), answering the
// row as JSON. Nothing else: no rate limit, no presentation, no request log. Its pool has the product's
// size, so only the work differs.
import express from 'express';
import { loadConfig } from '../src/config.js';
import { createPool } from '../src/db/pool.js';
import { principalOf, requireApiKey } from '../src/http/auth.js';
import { readVideoJob } from '../src/video-jobs/records.js';
import { listen } from './listen.js';
import type { RunningSubject } from './subject.js';

export const ROW_READ_PATH = '/floor/jobs';

export async function startRowReadFloor(env: NodeJS.ProcessEnv): Promise<RunningSubject> {
  const config = loadConfig(env);
  const db = createPool(config.databaseUrl!, config.databasePoolMax);
  const app = express();
  app.disable('x-powered-by');
  app.get(`${ROW_READ_PATH}/:id`, requireApiKey(db), async (req, res) => {
    const job = await readVideoJob(db, String(req.params['id']));
    if (!job || job.workspace_id !== principalOf(res).workspace_id) {
      res.status(404).json({});
      return;
    }
    res.json(job);
  });
  const server = await listen(app);
  return {
    url: server.url,
    async stop() {
      await server.close();
      await db.end();
    },
  };
}
