import { describe, expect, it } from 'vitest';
import { localKafkaOptions } from './bootstrap.ts';

describe('localKafkaOptions', () => {
  it('is the shared single node on 9092 unless LOCAL_KAFKA_PORT says otherwise', () => {
    expect(localKafkaOptions({})).toMatchObject({ name: 'single', nodes: 1, basePort: 9092 });
    expect(localKafkaOptions({ LOCAL_KAFKA_PORT: '' })).toMatchObject({ name: 'single', basePort: 9092 });
  });

  it('gives a broker on another port data of its own', () => {
    expect(localKafkaOptions({ LOCAL_KAFKA_PORT: '29092' })).toMatchObject({ name: 'single-29092', nodes: 1, basePort: 29092 });
  });

  it.each(['abc', '0', '65535', '9092.5'])('refuses %j', (value) => {
    expect(() => localKafkaOptions({ LOCAL_KAFKA_PORT: value })).toThrow(/LOCAL_KAFKA_PORT must be a port/);
  });
});
