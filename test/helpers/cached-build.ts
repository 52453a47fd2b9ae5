// Where a scripts/install-*.sh script caches its build: ${<cacheDirVariable>} if set, else
// ~/.cache/video-api/<name>-<the script's version=>. The build is not run here (it takes minutes).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectPath } from '../../src/paths.js';

/** The cached `file` of `script`'s build, or null when it has not been built. */
export function cachedBuild(script: string, cacheDirVariable: string, name: string, file: string): string | null {
  const text = fs.readFileSync(projectPath('scripts', script), 'utf8');
  const version = /^version=(\S+)$/m.exec(text)?.[1];
  if (!version) return null;
  const cacheHome = process.env['XDG_CACHE_HOME'] ?? path.join(os.homedir(), '.cache');
  const dir = process.env[cacheDirVariable] ?? path.join(cacheHome, 'video-api', `${name}-${version}`);
  const cached = path.join(dir, file);
  return fs.existsSync(cached) ? cached : null;
}
