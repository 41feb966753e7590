import { describe, expect, it } from 'vitest';
import { moveRelay, RELAY_MOVES, RelayStateError, type RelayState, type RelayStateName } from './state.ts';

const NAMES = Object.keys(RELAY_MOVES) as RelayStateName[];

function state(name: RelayStateName): RelayState {
  if (name === 'passing') return { name, nudged: false };
  if (name === 'polling' || name === 'backing-off') return { name, wake: () => {} };
  return { name };
}

const ALLOWED: Array<[RelayStateName, RelayStateName]> = [
  ['new', 'passing'],
  ['new', 'stopping'],
  ['passing', 'passing'],
  ['passing', 'polling'],
  ['passing', 'backing-off'],
  ['passing', 'stopping'],
  ['polling', 'passing'],
  ['polling', 'stopping'],
  ['backing-off', 'passing'],
  ['backing-off', 'stopping'],
  ['stopping', 'draining'],
  ['stopping', 'releasing'],
  ['draining', 'releasing'],
  ['releasing', 'stopped'],
];
const allowed = new Set(ALLOWED.map(([from, to]) => `${from}>${to}`));
const REFUSED = NAMES.flatMap((from) => NAMES.map((to): [RelayStateName, RelayStateName] => [from, to])).filter(
  ([from, to]) => !allowed.has(`${from}>${to}`),
);

describe('the relay moves', () => {
  it.each(ALLOWED)('lets %s go to %s', (from, to) => {
    const next = state(to);
    expect(moveRelay(state(from), next)).toBe(next);
  });

  it.each(REFUSED)('refuses %s to %s, naming both', (from, to) => {
    let thrown: unknown;
    try {
      moveRelay(state(from), state(to));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(RelayStateError);
    expect(thrown).toMatchObject({ from, to, message: expect.stringContaining(`'${from}' to '${to}'`) });
  });

  it('allows exactly the moves listed here, so a new move is a decision made in both places', () => {
    const table = NAMES.flatMap((from) => RELAY_MOVES[from].map((to) => `${from}>${to}`));
    expect(new Set(table)).toEqual(allowed);
  });

  it('ends: nothing leaves stopped, and a stopped relay is never started again', () => {
    expect(RELAY_MOVES.stopped).toEqual([]);
    for (const from of ['stopping', 'draining', 'releasing', 'stopped'] as const) expect(RELAY_MOVES[from]).not.toContain('passing');
  });
});
