import { describe, expect, it } from 'vitest';
import { SpanKind } from '@opentelemetry/api';
import { AlwaysOffSampler, ParentBasedSampler, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import { startTracing, TRACING_OFF, TracingConfigError, tracingSettingsFromEnv } from './tracing.ts';

describe('tracing settings from the OTEL_* variables', () => {
  it('is off when no OTEL_* variable asks for it: no SDK, nothing injected or extracted', () => {
    expect(tracingSettingsFromEnv({}, 'ingress')).toBeUndefined();
    expect(tracingSettingsFromEnv({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }, 'ingress')).toBeUndefined();
    const tracing = startTracing(tracingSettingsFromEnv({}, 'ingress'));
    expect(tracing).toBe(TRACING_OFF);
    expect(tracing.enabled).toBe(false);
    const span = tracing.startSpan('x', { kind: SpanKind.SERVER });
    expect(span.isRecording()).toBe(false);
    expect(tracing.inject(span)).toEqual({});
  });

  it('is on with an OTLP endpoint (or OTEL_TRACES_EXPORTER=otlp), off again with OTEL_SDK_DISABLED or exporter none', () => {
    expect(tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, 'worker')?.serviceName).toBe('worker');
    expect(
      tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces', OTEL_SERVICE_NAME: 'w' }, 'worker')
        ?.serviceName,
    ).toBe('w');
    expect(tracingSettingsFromEnv({ OTEL_TRACES_EXPORTER: 'otlp' }, 'worker')).toBeDefined();
    expect(tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }, 'worker')).toBeUndefined();
    expect(
      tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }, 'worker'),
    ).toBeUndefined();
  });

  it('reads the sampler and the batch processor limits; rejects what it cannot honour', () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(tracingSettingsFromEnv(on, 'w')!.sampler).toBeInstanceOf(ParentBasedSampler);
    expect(tracingSettingsFromEnv({ ...on, OTEL_TRACES_SAMPLER: 'always_off' }, 'w')!.sampler).toBeInstanceOf(AlwaysOffSampler);
    expect(
      tracingSettingsFromEnv({ ...on, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' }, 'w')!.sampler,
    ).toBeInstanceOf(TraceIdRatioBasedSampler);
    expect(tracingSettingsFromEnv({ ...on, OTEL_BSP_SCHEDULE_DELAY: '100' }, 'w')!.batch).toEqual({ scheduledDelayMillis: 100 });
    expect(() => tracingSettingsFromEnv({ ...on, OTEL_TRACES_SAMPLER: 'sometimes' }, 'w')).toThrow(TracingConfigError);
    expect(() => tracingSettingsFromEnv({ ...on, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }, 'w')).toThrow(
      TracingConfigError,
    );
    expect(() => tracingSettingsFromEnv({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'w')).toThrow(TracingConfigError);
    expect(tracingSettingsFromEnv({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, 'w')).toBeDefined();
  });

  it('on: continues a W3C traceparent and injects the child span under the same header names', async () => {
    const tracing = startTracing(tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }, 'w'));
    const parent = tracing.extract({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'a=b' });
    const span = tracing.startSpan('x', { kind: SpanKind.PRODUCER }, parent);
    const headers = tracing.inject(span);
    expect(headers.traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(headers.traceparent).not.toContain('00f067aa0ba902b7');
    expect(headers.tracestate).toBe('a=b');
    // A malformed traceparent starts a new trace instead of failing.
    const fresh = tracing.startSpan('y', { kind: SpanKind.CONSUMER }, tracing.extract({ traceparent: 'garbage' }));
    expect(fresh.spanContext().traceId).not.toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    // Left unended: nothing to export, so shutdown does not wait for the (absent) collector.
    await tracing.shutdown();
  });
});
