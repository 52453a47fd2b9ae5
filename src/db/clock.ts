// PostgreSQL's clock, read from this process. Absolute times that PostgreSQL compares with its own clock
// (a create's acceptance deadline, which the charge checks against clock_timestamp(); created_at, which
// the reconciler compares with now()) are taken from it, never from this host's clock, which may be
// seconds or minutes off. One query measures the offset between the two clocks; it is measured again
// once older than `max_age_ms`, so a create costs no extra round trip in the steady state.

export interface DatabaseClockOptions {
  /** How long a measured offset is used before it is measured again. */
  max_age_ms?: number;
  /** This host's clock (Date.now). */
  hostNow?: () => number;
}

interface Queryable {
  query(text: string): Promise<{ rows: Array<{ ms: number | string }> }>;
}

/** An offset measured longer ago than this is measured again. */
export const DATABASE_CLOCK_MAX_AGE_MS = 30_000;

export class DatabaseClock {
  private offset_ms: number | null = null;
  private measured_at_ms = -Infinity;
  private measuring: Promise<void> | null = null;
  private readonly max_age_ms: number;
  private readonly hostNow: () => number;

  constructor(
    private readonly db: Queryable,
    opts: DatabaseClockOptions = {},
  ) {
    this.max_age_ms = opts.max_age_ms ?? DATABASE_CLOCK_MAX_AGE_MS;
    this.hostNow = opts.hostNow ?? Date.now;
  }

  /**
   * PostgreSQL's time now, in Unix milliseconds: this host's clock plus the measured offset, measured
   * first when it is missing or old. A failed measurement keeps the last offset if there is one (clocks
   * drift slowly); without any, the database's error is thrown.
   */
  async nowMs(): Promise<number> {
    if (this.hostNow() - this.measured_at_ms > this.max_age_ms) {
      try {
        await (this.measuring ??= this.measure().finally(() => (this.measuring = null)));
      } catch (err) {
        if (this.offset_ms === null) throw err;
      }
    }
    return this.hostNow() + this.offset_ms!;
  }

  /** The offset from this host's clock to PostgreSQL's, as last measured (null: never). */
  offsetMs(): number | null {
    return this.offset_ms;
  }

  /** One round trip: PostgreSQL's clock against the middle of the round trip on this host's. */
  private async measure(): Promise<void> {
    const sent_ms = this.hostNow();
    const { rows } = await this.db.query('SELECT extract(epoch FROM clock_timestamp()) * 1000 AS ms');
    const received_ms = this.hostNow();
    this.offset_ms = Math.round(Number(rows[0]!.ms) - (sent_ms + received_ms) / 2);
    this.measured_at_ms = received_ms;
  }
}
