// The bench's order of turns in phase 1 (bench/turn-order.ts): over six rounds each subject on Temporal
// takes each place of a round twice and follows each other subject twice, so neither a place nor the
// turn before favours one of them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BALANCED_ROUNDS, ON_TEMPORAL, turnOrder, type CreateSubject } from '../../bench/turn-order.js';

const rounds = Array.from({ length: BALANCED_ROUNDS }, (_, i) => turnOrder(i + 1));

test('every round starts with bare Express, then each subject on Temporal once', () => {
  for (const order of rounds) {
    assert.equal(order[0], 'bare');
    assert.deepEqual([...order.slice(1)].sort(), [...ON_TEMPORAL].sort());
  }
});

test('over six rounds each subject on Temporal takes each place twice', () => {
  for (const subject of ON_TEMPORAL) {
    const places = rounds.map((order) => order.indexOf(subject)).sort();
    assert.deepEqual(places, [1, 1, 2, 2, 3, 3], subject);
  }
});

test('over six rounds each subject on Temporal follows each other subject twice; over three it does not', () => {
  const predecessors = (subject: CreateSubject, over: CreateSubject[][]) => {
    const count = new Map<CreateSubject, number>();
    for (const order of over) {
      const before = order[order.indexOf(subject) - 1]!;
      count.set(before, (count.get(before) ?? 0) + 1);
    }
    return Object.fromEntries([...count.entries()].sort());
  };
  for (const subject of ON_TEMPORAL) {
    const others = (['bare', ...ON_TEMPORAL] as CreateSubject[]).filter((s) => s !== subject).sort();
    assert.deepEqual(predecessors(subject, rounds), Object.fromEntries(others.map((s) => [s, 2])), subject);
  }
  // The three rotated rounds alone are not balanced: the product followed the floor twice.
  assert.equal(predecessors('product', rounds.slice(0, 3))['floor'], 2);
});

test('the order repeats every six rounds; rounds count from 1', () => {
  for (let r = 1; r <= BALANCED_ROUNDS; r++) assert.deepEqual(turnOrder(r + BALANCED_ROUNDS), turnOrder(r));
  assert.throws(() => turnOrder(0), /count from 1/);
});
