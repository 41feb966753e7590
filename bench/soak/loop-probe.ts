// Preloaded into each service by bench:soak (`--import` of its bundle, built by infra/build/build.ts). The
// services register no prom-client default metrics (their /metrics has no nodejs_eventloop_lag_*),
// so this measures the event-loop delay the way those metrics would (perf_hooks
// monitorEventLoopDelay at 10 ms resolution) without touching the services. The services start no
// worker threads, so it measures the main thread only (Node runs --import in a worker thread too;
// there it does nothing). The bench asks over the IPC channel; each answer covers the time since
// the previous one (the histogram is reset).
//   bench -> main thread (IPC):  { type: 'loop-probe:sample' }
//   main thread -> bench (IPC):  { type: 'loop-probe:window', threads: [LoopWindow] }
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { isMainThread } from 'node:worker_threads';

export interface LoopWindow {
  /** Always 'main': the thread the window was measured on. */
  thread: string;
  /** Delay beyond the 10 ms timer period over the window, ms; NaN when the window had no sample. */
  p50: number;
  p99: number;
  max: number;
  samples: number;
}

const LOOP_RESOLUTION_MS = 10;

// The histogram records the time between two timer callbacks, i.e. the 10 ms period plus the delay
// (prom-client reports it as is, so its nodejs_eventloop_lag_p99_seconds reads 10 ms higher).
const delayMs = (ns: number) => Math.max(0, ns / 1e6 - LOOP_RESOLUTION_MS);

if (isMainThread) {
  const histogram = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  histogram.enable();

  const take = (thread: string): LoopWindow => {
    const window: LoopWindow =
      histogram.count > 0
        ? {
            thread,
            p50: delayMs(histogram.percentile(50)),
            p99: delayMs(histogram.percentile(99)),
            max: delayMs(histogram.max),
            samples: histogram.count,
          }
        : { thread, p50: NaN, p99: NaN, max: NaN, samples: 0 };
    histogram.reset();
    return window;
  };

  process.on('message', (message: { type?: string }) => {
    if (message?.type !== 'loop-probe:sample') return;
    process.send?.({ type: 'loop-probe:window', threads: [take('main')] });
  });
  // The IPC pipe may not keep a service alive once it wants to exit (unref'd after the listener,
  // which refs it).
  process.channel?.unref();
}
