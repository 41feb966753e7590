// The relay's life in named states, and the only moves between them. Every change of state goes
// through moveRelay, so a move the relay was not built for (a start after a stop, a second loop)
// fails at once, naming both ends, instead of leaving two loops or a half-stopped relay.

/** A relay before start(): passes run only when a caller drives them (publishOnce). */
interface New {
  name: 'new';
}
/** The loop runs one pass. A nudge meanwhile means: pass again without waiting. */
interface Passing {
  name: 'passing';
  nudged: boolean;
}
/** The loop waits pollMs for rows: a nudge or a stop ends the wait. */
interface Polling {
  name: 'polling';
  wake: () => void;
}
/** The loop waits after a failed pass: only a stop ends the wait, a nudge cannot help. */
interface BackingOff {
  name: 'backing-off';
  wake: () => void;
}
/** stop() was called: the loop ends after its pass or its wait. */
interface Stopping {
  name: 'stopping';
}
/** The loop has ended: the relay publishes what was applied before the stop (stop-drain.ts). */
interface Draining {
  name: 'draining';
}
/** Giving up the leadership and closing the producer. */
interface Releasing {
  name: 'releasing';
}
interface Stopped {
  name: 'stopped';
}

export type RelayState = New | Passing | Polling | BackingOff | Stopping | Draining | Releasing | Stopped;
export type RelayStateName = RelayState['name'];

/** Where each state may go. */
export const RELAY_MOVES: { readonly [From in RelayStateName]: readonly RelayStateName[] } = {
  new: ['passing', 'stopping'],
  // A pass follows a pass when the last one left ready rows or a nudge came.
  passing: ['passing', 'polling', 'backing-off', 'stopping'],
  polling: ['passing', 'stopping'],
  'backing-off': ['passing', 'stopping'],
  // A relay whose loop never ran (its passes were driven by publishOnce) has nothing of its own to drain.
  stopping: ['draining', 'releasing'],
  draining: ['releasing'],
  releasing: ['stopped'],
  stopped: [],
};

/** A move RELAY_MOVES does not allow: a fault of the relay's own code, never of its input. */
export class RelayStateError extends Error {
  readonly from: RelayStateName;
  readonly to: RelayStateName;
  constructor(from: RelayStateName, to: RelayStateName) {
    super(`outbox relay: no move from '${from}' to '${to}'`);
    this.name = 'RelayStateError';
    this.from = from;
    this.to = to;
  }
}

/** `to`, if RELAY_MOVES lets `from` go there; otherwise throws RelayStateError. */
export function moveRelay(from: RelayState, to: RelayState): RelayState {
  if (!RELAY_MOVES[from.name].includes(to.name)) throw new RelayStateError(from.name, to.name);
  return to;
}

/** The states in which start() has run and stop() has not: what readiness reports as running. */
export function isRunning(state: RelayState): state is Passing | Polling | BackingOff {
  return state.name === 'passing' || state.name === 'polling' || state.name === 'backing-off';
}
