import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanOptions,
  type TextMapGetter,
  type TextMapSetter,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { envDetector, detectResources, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';

export { SpanKind, SpanStatusCode, type Attributes, type Context, type Link, type Span };

/** The W3C trace-context fields as they travel in HTTP and Kafka record headers. */
export interface TraceHeaders {
  traceparent?: string | undefined;
  tracestate?: string | undefined;
}

/**
 * Tracing as the services use it: spans with explicit parents (no global provider, no context
 * manager), W3C trace context in and out. `enabled` is false when no OTEL_* variable asks for
 * tracing; callers check it before building spans, headers or attributes, so the hot paths do
 * nothing extra then.
 */
export interface Tracing {
  readonly enabled: boolean;
  startSpan(name: string, options: SpanOptions, parent?: Context): Span;
  /** The context carried by W3C headers; the root context when they carry none (or a malformed one). */
  extract(headers: TraceHeaders): Context;
  /** The W3C headers that continue `span`. */
  inject(span: Span): TraceHeaders;
  /** The context to start children of `span` in. */
  contextOf(span: Span): Context;
  /** Exports what is buffered, then stops. */
  shutdown(): Promise<void>;
}

const noSpan = trace.wrapSpanContext({ traceId: '00000000000000000000000000000000', spanId: '0000000000000000', traceFlags: 0 });

/** Tracing switched off: every method a no-op (no SDK, no exporter). */
export const TRACING_OFF: Tracing = {
  enabled: false,
  startSpan: () => noSpan,
  extract: () => ROOT_CONTEXT,
  inject: () => ({}),
  contextOf: () => ROOT_CONTEXT,
  shutdown: () => Promise.resolve(),
};

export interface TracingSettings {
  serviceName: string;
  sampler: Sampler;
  /** OTEL_BSP_*: the batch span processor's limits (the SDK default where unset). */
  batch: { scheduledDelayMillis?: number; maxQueueSize?: number; maxExportBatchSize?: number; exportTimeoutMillis?: number };
}

export class TracingConfigError extends Error {}

type Env = Readonly<Record<string, string | undefined>>;

function set(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/**
 * The standard OTEL_* variables (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/).
 * undefined (tracing off) unless an OTLP endpoint is set or OTEL_TRACES_EXPORTER names otlp, and
 * always off with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. The exporter reads the
 * endpoint, headers, timeout and compression variables itself.
 */
export function tracingSettingsFromEnv(env: Env, defaultServiceName: string): TracingSettings | undefined {
  if (set(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined;
  const exporters = (set(env, 'OTEL_TRACES_EXPORTER') ?? '').split(',').map((e) => e.trim().toLowerCase());
  if (exporters.includes('none')) return undefined;
  const endpoint = set(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ?? set(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (endpoint === undefined && !exporters.includes('otlp')) return undefined;
  const protocol = set(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? set(env, 'OTEL_EXPORTER_OTLP_PROTOCOL');
  // The OTLP/HTTP exporter speaks JSON; every collector accepts it on the same port and path.
  if (protocol !== undefined && protocol !== 'http/json') {
    throw new TracingConfigError(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol}: the bridge exports OTLP over HTTP as JSON (http/json)`);
  }
  const batch: TracingSettings['batch'] = {};
  const numbers = {
    OTEL_BSP_SCHEDULE_DELAY: 'scheduledDelayMillis',
    OTEL_BSP_MAX_QUEUE_SIZE: 'maxQueueSize',
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: 'maxExportBatchSize',
    OTEL_BSP_EXPORT_TIMEOUT: 'exportTimeoutMillis',
  } as const;
  for (const [name, key] of Object.entries(numbers)) {
    const text = set(env, name);
    if (text === undefined) continue;
    const value = Number(text);
    if (!Number.isInteger(value) || value < 0) throw new TracingConfigError(`${name}=${text}: expected a non-negative integer`);
    batch[key] = value;
  }
  return { serviceName: set(env, 'OTEL_SERVICE_NAME') ?? defaultServiceName, sampler: samplerFromEnv(env), batch };
}

/** OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG; the default is parentbased_always_on. */
export function samplerFromEnv(env: Env): Sampler {
  const name = set(env, 'OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  const argText = set(env, 'OTEL_TRACES_SAMPLER_ARG');
  const ratio = () => {
    const value = argText === undefined ? 1 : Number(argText);
    if (!(value >= 0 && value <= 1)) throw new TracingConfigError(`OTEL_TRACES_SAMPLER_ARG=${argText}: expected a ratio from 0 to 1`);
    return value;
  };
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio());
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      throw new TracingConfigError(`OTEL_TRACES_SAMPLER=${name}: not one of always_on, always_off, traceidratio, parentbased_*`);
  }
}

const getter: TextMapGetter<TraceHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => (key === 'traceparent' ? carrier.traceparent : key === 'tracestate' ? carrier.tracestate : undefined),
};
const setter: TextMapSetter<TraceHeaders> = {
  set: (carrier, key, value) => {
    if (key === 'traceparent') carrier.traceparent = value;
    else if (key === 'tracestate') carrier.tracestate = value;
  },
};

/** Tracing on: an SDK tracer provider exporting over OTLP/HTTP, with the W3C trace-context propagator. */
export function startTracing(settings: TracingSettings | undefined): Tracing {
  if (settings === undefined) return TRACING_OFF;
  const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName }).merge(
    // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, read by the SDK's own detector.
    detectResources({ detectors: [envDetector] }),
  );
  const provider = new TracerProvider({
    resource,
    sampler: settings.sampler,
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter(), ...settings.batch })],
  });
  const tracer: Tracer = provider.getTracer('theme-bridge');
  const propagator = new W3CTraceContextPropagator();
  return {
    enabled: true,
    startSpan: (name, options, parent) => tracer.startSpan(name, options, parent ?? ROOT_CONTEXT),
    extract: (headers) => propagator.extract(ROOT_CONTEXT, headers, getter),
    inject: (span) => {
      const headers: TraceHeaders = {};
      propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, setter);
      return headers;
    },
    contextOf: (span) => trace.setSpan(ROOT_CONTEXT, span),
    shutdown: () => provider.shutdown(),
  };
}

/** For a service's main.ts: the OTEL_* variables read once; a bad value is printed and exits 1. */
export function startTracingOrExit(env: Env, defaultServiceName: string): Tracing {
  try {
    return startTracing(tracingSettingsFromEnv(env, defaultServiceName));
  } catch (error) {
    if (!(error instanceof TracingConfigError)) throw error;
    console.error(error.message);
    process.exit(1);
  }
}

/** Ends a span as failed with the error. */
export function endSpanWithError(span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  span.end();
}
