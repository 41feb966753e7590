// Preloaded into each service by bench:soak (`--import` of its bundle, built by infra/build/build.ts). The
// services register no prom-client default metrics (their /metrics has no nodejs_eventloop_lag_*),
// so this measures the event-loop delay the way those metrics would (perf_hooks
// monitorEventLoopDelay at 10 ms resolution) without touching the services. Node runs --import in
// worker threads too, so a thread a service starts would get a histogram of its own. The bench asks over the
// IPC channel; each answer covers the time since the previous one (the histograms are reset).
//   bench -> main thread (IPC):  { type: 'loop-probe:sample' }
//   main thread -> bench (IPC):  { type: 'loop-probe:window', threads: LoopWindow[] }
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { isMainThread, threadId, workerData } from 'node:worker_threads';

export interface LoopWindow {
  /** 'main', or a worker thread's workerData.kind, else 'thread <id>'. */
  thread: string;
  /** Delay beyond the 10 ms timer period over the window, ms; NaN when the window had no sample. */
  p50: number;
  p99: number;
  max: number;
  samples: number;
}

const LOOP_RESOLUTION_MS = 10;
const CHANNEL = 'bench-soak-loop-probe';
// How long the main thread waits for its worker threads' answers (a blocked thread answers late
// and its window then goes into the next answer).
const THREAD_REPLY_WAIT_MS = 100;

const histogram = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
histogram.enable();

// The histogram records the time between two timer callbacks, i.e. the 10 ms period plus the delay
// (prom-client reports it as is, so its nodejs_eventloop_lag_p99_seconds reads 10 ms higher).
const delayMs = (ns: number) => Math.max(0, ns / 1e6 - LOOP_RESOLUTION_MS);

function take(thread: string): LoopWindow {
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
}

const channel = new BroadcastChannel(CHANNEL);

if (isMainThread) {
  const threadWindows: LoopWindow[] = [];
  channel.onmessage = (event) => {
    const data = (event as MessageEvent).data as { type?: string; window?: LoopWindow };
    if (data.type === 'window' && data.window) threadWindows.push(data.window);
  };
  process.on('message', (message: { type?: string }) => {
    if (message?.type !== 'loop-probe:sample') return;
    threadWindows.length = 0;
    channel.postMessage({ type: 'sample' });
    const main = take('main');
    setTimeout(() => process.send?.({ type: 'loop-probe:window', threads: [main, ...threadWindows] }), THREAD_REPLY_WAIT_MS).unref();
  });
  process.channel?.unref();
} else {
  const kind = (workerData as { kind?: unknown } | null)?.kind;
  const label = typeof kind === 'string' ? kind : `thread ${threadId}`;
  channel.onmessage = (event) => {
    const data = (event as MessageEvent).data as { type?: string };
    if (data.type === 'sample') channel.postMessage({ type: 'window', window: take(label) });
  };
}
// Neither the channel nor the IPC pipe may keep a service alive once it wants to exit (unref'd
// after the listeners, which ref them).
(channel as unknown as { unref(): void }).unref();
