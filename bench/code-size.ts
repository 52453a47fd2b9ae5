// The size of the job core: lines of every file under workflows/ and activities/ (what a reader of the
// orchestration and its side effects has to hold).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const CORE_FOLDERS = ['workflows', 'activities'];

export interface CodeLines {
  total: number;
  /** Folder -> its lines. */
  by_folder: Map<string, number>;
}

function filesUnder(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

/** Lines as `wc -l` counts them (newline characters). */
const linesOf = (file: string) => fs.readFileSync(file, 'utf8').split('\n').length - 1;

export function codeLines(): CodeLines {
  const by_folder = new Map(CORE_FOLDERS.map((f) => [f, filesUnder(path.join(ROOT, f)).reduce((a, file) => a + linesOf(file), 0)]));
  return { total: [...by_folder.values()].reduce((a, n) => a + n, 0), by_folder };
}
