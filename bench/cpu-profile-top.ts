// Where a --cpu-prof profile's time went: self time summed by function (name, file, line), the largest
// first, and by file. `npx tsx bench/cpu-profile-top.ts <file.cpuprofile> [rows]` (rows: 30 unless told).
import fs from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const [file, rowsArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: tsx bench/cpu-profile-top.ts <file.cpuprofile> [rows]\n');
  process.exit(2);
}
const rows = Number(rowsArg ?? 30);
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
// Each sample's time is the delta to the next sample.
const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? 0)));
const total = profile.endTime - profile.startTime;
const sum = (key: (n: ProfileNode) => string) => {
  const m = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const k = key(byId.get(id)!);
    m.set(k, (m.get(k) ?? 0) + us);
  }
  return [...m].sort((a, b) => b[1] - a[1]);
};
const short = (url: string) =>
  url
    .replace(/^file:\/\//, '')
    .replace(/^.*\/node_modules\//, 'node_modules/')
    .replace(process.cwd() + '/', '');
const line = (k: string, us: number) => `${(us / 1000).toFixed(0).padStart(8)} ms ${((100 * us) / total).toFixed(1).padStart(5)} %  ${k}`;
console.log(`${file}: ${(total / 1e6).toFixed(1)} s profiled`);
console.log('self time by function');
for (const [k, us] of sum(
  (n) => `${n.callFrame.functionName || '(anonymous)'} ${short(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`,
).slice(0, rows))
  console.log(line(k, us));
console.log('self time by file');
for (const [k, us] of sum((n) => short(n.callFrame.url) || `(${n.callFrame.functionName})`).slice(0, rows)) console.log(line(k, us));
