// Manage the local Kafka the start commands and the tests use when KAFKA_BROKERS is unset.
//   tsx infra/provision/kafka/cli.ts start [--cluster3]   start (or reuse) and leave it running
//   tsx infra/provision/kafka/cli.ts stop  [--cluster3]   stop it from its pid files
//   tsx infra/provision/kafka/cli.ts status [--cluster3]
import { brokerReady } from '#plumbing/kafka/client.ts';
import { LocalKafka, singleNodeDefaults, threeNodeDefaults, KAFKA_VERSION } from './local-kafka.ts';

const [command, ...flags] = process.argv.slice(2);
const defaults = flags.includes('--cluster3') ? threeNodeDefaults : singleNodeDefaults;
const kafka = new LocalKafka({ ...defaults, log: (line) => console.error(`[kafka] ${line}`) });

switch (command) {
  case 'start': {
    const t0 = Date.now();
    const { started, reused } = await kafka.start();
    console.log(JSON.stringify({ kafka: KAFKA_VERSION, brokers: kafka.brokers, started, reused, readyMs: Date.now() - t0 }));
    break;
  }
  case 'stop':
    await kafka.stopAll();
    console.log(JSON.stringify({ stopped: kafka.brokers }));
    break;
  case 'status': {
    const ready = await brokerReady(kafka.brokers, defaults.nodes);
    console.log(JSON.stringify({ brokers: kafka.brokers, ready }));
    process.exitCode = ready ? 0 : 1;
    break;
  }
  default:
    console.error('usage: tsx infra/provision/kafka/cli.ts start|stop|status [--cluster3]');
    process.exitCode = 2;
}
