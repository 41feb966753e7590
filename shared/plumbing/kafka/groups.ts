// Consumer groups as the broker describes them.
import { AssignerProtocol } from 'kafkajs';

/** The topics a group member subscribed to, from the metadata describeGroups returns for it. */
export function memberTopics(memberMetadata: Buffer): string[] {
  return AssignerProtocol.MemberMetadata.decode(memberMetadata)?.topics ?? [];
}

/**
 * A commit or heartbeat the group refused because it moved on: another coordinator, a rebalance,
 * a new generation, a member it no longer knows. kafkajs re-joins (and looks the coordinator up
 * again) only when such an error reaches its fetch loop; a commit caught elsewhere must hand it
 * back, or the member applies on while every later commit is refused the same way.
 */
const GROUP_REFUSALS: ReadonlySet<string> = new Set([
  'NOT_COORDINATOR_FOR_GROUP',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'REBALANCE_IN_PROGRESS',
]);

export function refusedByGroup(error: unknown): boolean {
  const type = (error as { type?: unknown } | null)?.type;
  return typeof type === 'string' && GROUP_REFUSALS.has(type);
}
