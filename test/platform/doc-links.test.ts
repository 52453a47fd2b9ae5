// The documentation's relative links resolve: every link and image of README.md, docs/*.md and
// bench/README.md that points into the repository names a file or folder that exists, and every anchor
// (`#section`, alone or after a Markdown file) names a heading of its page, slugged as GitHub slugs them.
// Links to other sites are not followed. No infrastructure needed.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const PAGES = [
  'README.md',
  'bench/README.md',
  ...fs
    .readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The page's lines outside fenced code blocks. */
function proseLines(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** GitHub's anchor of a heading: its text without markup, lower case, punctuation dropped, spaces as hyphens. */
export function slugOf(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** The anchors of a page's headings, a repeated one numbered as GitHub numbers it (-1, -2, ...). */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of proseLines(fs.readFileSync(file, 'utf8'))) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const slug = slugOf(m[1]!);
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** The targets of a page's inline links and images (`[text](target)`), outside code. */
function linksOf(file: string): { line: number; target: string }[] {
  const out: { line: number; target: string }[] = [];
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  let fenced = false;
  lines.forEach((raw, i) => {
    if (/^\s*(```|~~~)/.test(raw)) fenced = !fenced;
    if (fenced) return;
    const line = raw.replace(/`[^`]*`/g, '');
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ line: i + 1, target: m[1]! });
  });
  return out;
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target);

/** Why a link of `file` does not resolve, or null when it does. */
function brokenLink(file: string, target: string): string | null {
  const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined];
  const resolved = pathPart === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURI(pathPart)));
  if (resolved.startsWith('..')) return `${target} leaves the repository`;
  if (!fs.existsSync(resolved)) return `${target}: no such file or folder (${resolved})`;
  if (anchor === undefined) return null;
  if (!resolved.endsWith('.md')) return null;
  if (!anchorsOf(resolved).has(anchor)) return `${target}: ${resolved} has no heading with the anchor #${anchor}`;
  return null;
}

describe('the documentation links resolve', () => {
  test("the pages are found, and the slugs are GitHub's", () => {
    assert.ok(PAGES.includes('docs/architecture.md') && PAGES.includes('docs/api.md'), PAGES.join(', '));
    assert.equal(slugOf('The OpenAI SDKs (`/v1`)'), 'the-openai-sdks-v1');
    assert.equal(slugOf('Which Temporal: the dev server or temporal-server'), 'which-temporal-the-dev-server-or-temporal-server');
    assert.equal(slugOf("A job's guarantees"), 'a-jobs-guarantees');
    assert.equal(slugOf('Images: first and last frame'), 'images-first-and-last-frame');
  });

  test('a broken link, a missing anchor and a link out of the repository are caught', () => {
    assert.match(brokenLink('README.md', 'docs/no-such-page.md') ?? '', /no such file/);
    assert.match(brokenLink('README.md', 'docs/api.md#no-such-heading') ?? '', /no heading/);
    assert.match(brokenLink('README.md', '#no-such-heading') ?? '', /no heading/);
    assert.match(brokenLink('docs/api.md', '../../elsewhere.md') ?? '', /leaves the repository/);
    assert.equal(brokenLink('docs/api.md', '../README.md#running-it'), null);
  });

  for (const page of PAGES) {
    test(`every relative link of ${page} resolves`, () => {
      const links = linksOf(page).filter((l) => !isExternal(l.target));
      const broken = links.flatMap((l) => {
        const why = brokenLink(page, l.target);
        return why ? [`${page}:${l.line}: ${why}`] : [];
      });
      assert.deepEqual(broken, []);
    });
  }
});
