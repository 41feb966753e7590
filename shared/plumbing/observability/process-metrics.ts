import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * prom-client's standard process and Node.js metrics on a service's registry: resident memory
 * (process_resident_memory_bytes), heap by space, event-loop delay (nodejs_eventloop_lag_p99_seconds
 * and friends, sampled every 10 ms), GC pauses, handles. What an operator sizes a container with and
 * what bench:soak samples. Process-wide: several services in one process (tests) report the same.
 */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 10 });
}
