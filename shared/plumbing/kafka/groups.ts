// Consumer groups as the broker describes them.
import { AssignerProtocol } from 'kafkajs';

/** The topics a group member subscribed to, from the metadata describeGroups returns for it. */
export function memberTopics(memberMetadata: Buffer): string[] {
  return AssignerProtocol.MemberMetadata.decode(memberMetadata)?.topics ?? [];
}
