// CPU time spent by each party of a measurement (Linux /proc): the subject process, the Temporal dev
// server, PostgreSQL (the postmaster and its backends), this load generator, and the machine as a whole,
// so that what anything else on the machine took is visible too.
import fs from 'node:fs';
import os from 'node:os';
import type { Infra } from '../test/helpers/infra.js';

/** Clock ticks per second of /proc's times (USER_HZ: 100 on Linux). */
const TICKS_PER_S = 100;
const ticksToMs = (ticks: number) => (ticks * 1000) / TICKS_PER_S;

export interface CpuSample {
  subject_ms: number;
  temporal_ms: number;
  postgres_ms: number;
  client_ms: number;
  machine_busy_ms: number;
}

export type CpuDelta = CpuSample;

/** utime+stime (and the reaped children's, with `withChildren`) of a process, in ms; 0 if it is gone. */
export function processMs(pid: number, withChildren: boolean): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields from the state on (field 3 of proc(5)): utime is 14, stime 15, cutime 16, cstime 17.
    const [utime, stime, cutime, cstime] = [f[11], f[12], f[13], f[14]].map(Number) as [number, number, number, number];
    return ticksToMs(utime + stime + (withChildren ? cutime + cstime : 0));
  } catch {
    return 0;
  }
}

function pids(): number[] {
  return fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number);
}

function cmdline(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

function parentOf(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return -1;
  }
}

/** Busy time of all CPUs (everything but idle and iowait), in ms. */
function machineBusyMs(): number {
  const cpu = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
  return ticksToMs(total - cpu[3]! - cpu[4]!);
}

export interface CpuProbe {
  /** Cumulative CPU of each party now. */
  sample(subjectPid: number): CpuSample;
}

/** Finds this run's Temporal dev server and postmaster by their ports. Null where /proc is not readable. */
export function cpuProbe(infra: Infra): CpuProbe | null {
  if (os.platform() !== 'linux') return null;
  const temporalPort = infra.temporalAddress.split(':').pop()!;
  const pgPort = new URL(infra.databaseUrl).port;
  const all = pids();
  const temporal = all.find((p) => / start-dev /.test(cmdline(p)) && cmdline(p).includes(` --port ${temporalPort} `));
  const postmaster = all.find((p) => /postgres/.test(cmdline(p)) && / -D /.test(cmdline(p)) && cmdline(p).includes(` -p ${pgPort} `));
  if (!temporal || !postmaster) return null;
  return {
    sample(subjectPid) {
      const backends = pids().filter((p) => parentOf(p) === postmaster);
      const client = process.cpuUsage();
      return {
        subject_ms: processMs(subjectPid, true),
        temporal_ms: processMs(temporal, true),
        postgres_ms: processMs(postmaster, true) + backends.reduce((a, p) => a + processMs(p, false), 0),
        client_ms: (client.user + client.system) / 1000,
        machine_busy_ms: machineBusyMs(),
      };
    },
  };
}

export function cpuDelta(before: CpuSample, after: CpuSample): CpuDelta {
  return {
    subject_ms: after.subject_ms - before.subject_ms,
    temporal_ms: after.temporal_ms - before.temporal_ms,
    postgres_ms: after.postgres_ms - before.postgres_ms,
    client_ms: after.client_ms - before.client_ms,
    machine_busy_ms: after.machine_busy_ms - before.machine_busy_ms,
  };
}

/** A window of the machine is quiet when all its CPUs together were busy less than this share of it. */
const QUIET_BUSY_SHARE = 0.1;
const QUIET_WINDOW_MS = 500;
/** Quiet windows in a row that make the machine settled. */
const QUIET_WINDOWS = 2;

/**
 * Waits until the machine has been quiet for QUIET_WINDOWS windows in a row, at most `max_ms`, and says
 * how long that took: work one measurement leaves behind (a server closing the workflows it just
 * finished) must not be billed to the next one.
 */
export async function waitUntilQuiet(max_ms: number): Promise<{ waited_ms: number; quiet: boolean }> {
  const started = Date.now();
  const capacity_ms = QUIET_WINDOW_MS * os.cpus().length;
  let quietWindows = 0;
  while (Date.now() - started < max_ms) {
    const before = machineBusyMs();
    await new Promise((r) => setTimeout(r, QUIET_WINDOW_MS));
    quietWindows = machineBusyMs() - before < QUIET_BUSY_SHARE * capacity_ms ? quietWindows + 1 : 0;
    if (quietWindows >= QUIET_WINDOWS) return { waited_ms: Date.now() - started, quiet: true };
  }
  return { waited_ms: Date.now() - started, quiet: false };
}
