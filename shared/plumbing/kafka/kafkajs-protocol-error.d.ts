// kafkajs's table of Kafka protocol errors (src/protocol/error.js), which its typings leave out.
declare module 'kafkajs/src/protocol/error.js' {
  interface ProtocolErrorSpec {
    type: string;
    code: number;
    retriable: boolean;
    message: string;
  }
  const protocolErrors: { errorCodes: readonly ProtocolErrorSpec[] };
  export default protocolErrors;
}
