// The project root (the folder holding package.json), found from this file whether it runs from
// source (tsx) or from the build in dist/. Data files (migrations, assets, scripts) live under it.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (fs.existsSync(path.join(dir, 'package.json')) && fs.existsSync(path.join(dir, 'src'))) return dir;
    dir = path.dirname(dir);
  }
  throw new Error('project root (package.json beside src/) not found');
}

export const PROJECT_ROOT = findRoot();
export const projectPath = (...segments: string[]) => path.join(PROJECT_ROOT, ...segments);
