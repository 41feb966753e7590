import { AssignerProtocol } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { memberTopics } from './groups.ts';

describe('memberTopics', () => {
  it('reads the topics a member subscribed to from its describeGroups metadata', () => {
    const metadata = AssignerProtocol.MemberMetadata.encode({
      version: 0,
      topics: ['events', 'events.retry.1'],
      userData: Buffer.alloc(0),
    });
    expect(memberTopics(metadata)).toEqual(['events', 'events.retry.1']);
  });
});
