import { describe, expect, it } from 'vitest';
import { coalescedCommits } from './batch-handler.ts';

describe('coalescedCommits', () => {
  it('sends one commit for the callers that arrive while another is in flight, with what they resolved by then', async () => {
    const share = coalescedCommits();
    const sent: number[][] = [];
    let resolved = [1];
    const releases: Array<() => void> = [];
    const commit = () =>
      new Promise<void>((resolve) => {
        sent.push([...resolved]);
        releases.push(resolve);
      });
    const first = share(commit);
    resolved = [1, 2];
    const second = share(commit);
    resolved = [1, 2, 3];
    const third = share(commit);
    expect(sent).toEqual([[1]]);
    releases[0]!();
    await first;
    await new Promise((r) => setImmediate(r));
    // One more request for both waiting callers, carrying every offset resolved before it was sent.
    expect(sent).toEqual([[1], [1, 2, 3]]);
    releases[1]!();
    await Promise.all([second, third]);
    expect(sent).toHaveLength(2);
  });

  it('passes a failed commit to every caller waiting on it, and the next caller starts afresh', async () => {
    const share = coalescedCommits();
    let calls = 0;
    const failing = () => {
      calls += 1;
      return Promise.reject(new Error('coordinator moved'));
    };
    await expect(share(failing)).rejects.toThrow('coordinator moved');
    await expect(share(() => Promise.resolve())).resolves.toBeUndefined();
    expect(calls).toBe(1);
  });
});
