// What the fakes of the queue-style providers (fal, Replicate) do alike around their requests: each
// submitted request follows a plan (so many status polls waiting, so many running, then its outcome; or
// it ends by itself after a delay, for completion by callback alone), can be ended now by a test, and
// when it ends its callback is signed and posted to the webhook URL it was submitted with, recorded, and
// can be dropped or delivered again. What a request looks like, which states a poll walks through, how
// a callback is signed and what a provider refuses stay in each fake.
import { deliverCallback, FakeHttpServer } from './fake-http.js';

/** How a submitted request goes; each fake adds the polls of its own states and its outcomes. */
export interface Plan {
  /** Instead of polls, the request ends by itself this long after submission (callback completion). */
  complete_after_ms?: number;
}

/** A request as the shared machinery follows it; each fake adds its provider's fields. */
export interface PlannedRequest<P> {
  id: string;
  plan: P;
  /** The URL its callback goes to, when it was submitted with one. */
  webhook: string | undefined;
  /** Status polls counted so far. */
  polls: number;
  timers: NodeJS.Timeout[];
}

/** One callback as it was signed and posted; `K` names the request's id as the provider names it. */
export type CallbackDelivery<K extends string> = { [key in K]: string } & {
  url: string;
  headers: Record<string, string>;
  body: Buffer;
  /** The receiver's HTTP status; 0 when unreachable; undefined when the delivery was dropped. */
  answered: number | undefined;
};

/**
 * A fake whose requests follow plans. `R` is its routes, `O` what a request can end as (more than a
 * plan's outcomes when the provider also ends requests itself, e.g. cancelled ones), `P` its plan, `Q`
 * its request, `K` the name of the request's id in its recorded callbacks.
 */
export abstract class PlannedFake<
  R extends string,
  O extends string,
  P extends Plan,
  Q extends PlannedRequest<P>,
  K extends string,
> extends FakeHttpServer<R> {
  /** Plans of the next submitted requests, in order; then `defaultPlan`. */
  plans: P[] = [];
  defaultPlan = {} as P;
  /** Endings are not called back (tests of the polling fallback); they are still recorded. */
  dropCallbacks = false;
  readonly callbacks: CallbackDelivery<K>[] = [];
  /** The submitted requests, by id. */
  protected readonly planned = new Map<string, Q>();
  /** Results and output files are gone (see `expire`). */
  protected expired = false;

  constructor(private readonly deliveryKey: K) {
    super();
  }

  /** Whether a request has ended, in any of the provider's final states. */
  protected abstract ended(q: Q): boolean;
  /** The outcome its plan gives a request. */
  protected abstract plannedOutcome(plan: P): O;
  /** How many status polls a plan spends waiting, then running, before it ends. */
  protected abstract pollStages(plan: P): [waiting: number, running: number];
  /** Records that a poll found the request running: poll `step` of `steps` in that state. */
  protected abstract running(q: Q, step: number, steps: number): void;
  /** Records the request's end as `outcome`. */
  protected abstract settle(q: Q, outcome: O): void;
  /** The callback of an ended request, signed as the provider signs it; undefined when it asked for none. */
  protected abstract signedCallback(q: Q): { headers: Record<string, string>; body: Buffer } | undefined;

  /** Forgets the requests, their callbacks, the plans and the scripted failures. */
  reset(): void {
    this.resetHttp();
    this.clearTimers();
    this.planned.clear();
    this.callbacks.length = 0;
    this.plans = [];
    this.defaultPlan = {} as P;
    this.dropCallbacks = false;
    this.expired = false;
  }

  override async stop(): Promise<void> {
    this.clearTimers();
    await super.stop();
  }

  /** Results and output files are gone, as the provider deletes them a while after a request ends. */
  expire(): void {
    this.expired = true;
  }

  /** Ends a request now, as its plan says or as `outcome` (its callback is delivered unless dropped). */
  async finish(id: string, outcome?: O): Promise<void> {
    const q = this.planned.get(id);
    if (q) await this.end(q, outcome ?? this.plannedOutcome(q.plan));
  }

  /** Ends every request not ended yet. */
  async finishAll(outcome?: O): Promise<void> {
    await Promise.all([...this.planned.keys()].map((id) => this.finish(id, outcome)));
  }

  /** Delivers a request's last callback again, byte for byte (a replay). */
  async redeliver(id: string): Promise<number> {
    const last = this.callbacks.filter((c) => c[this.deliveryKey] === id).at(-1);
    if (!last) throw new Error(`no callback for ${id}`);
    return deliverCallback(last.url, last.headers, last.body);
  }

  /** The plan of the request being submitted. */
  protected nextPlan(): P {
    return this.plans.shift() ?? this.defaultPlan;
  }

  /** Takes a submitted request in; one planned to end by itself is timed to. */
  protected admit(q: Q): void {
    this.planned.set(q.id, q);
    if (q.plan.complete_after_ms !== undefined) this.endAfter(q, q.plan.complete_after_ms, () => this.plannedOutcome(q.plan));
  }

  /** Ends a request `delay_ms` from now, as `outcome` says then, unless it has ended before. */
  protected endAfter(q: Q, delay_ms: number, outcome: () => O): void {
    q.timers.push(setTimeout(() => void this.end(q, outcome()), delay_ms));
  }

  /** Counts a status poll: a request that ends by polls waits, then runs, then ends as planned. */
  protected async poll(q: Q): Promise<void> {
    if (this.ended(q) || q.plan.complete_after_ms !== undefined) return;
    q.polls += 1;
    const [waiting, running] = this.pollStages(q.plan);
    if (q.polls > waiting + running) await this.end(q, this.plannedOutcome(q.plan));
    else if (q.polls > waiting) this.running(q, q.polls - waiting, running);
  }

  /** Ends a request as `outcome`, unless it has ended, and calls its webhook back. */
  protected async end(q: Q, outcome: O): Promise<void> {
    if (this.ended(q)) return;
    q.timers.forEach(clearTimeout);
    this.settle(q, outcome);
    if (q.webhook === undefined) return;
    const callback = this.signedCallback(q);
    if (!callback) return;
    const delivery = { [this.deliveryKey]: q.id, url: q.webhook, ...callback, answered: undefined } as CallbackDelivery<K>;
    this.callbacks.push(delivery);
    if (!this.dropCallbacks) delivery.answered = await deliverCallback(delivery.url, delivery.headers, delivery.body);
  }

  private clearTimers(): void {
    for (const q of this.planned.values()) q.timers.forEach(clearTimeout);
  }
}
