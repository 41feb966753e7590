// The ingress's answers by HTTP status, from its Prometheus text (webhook_requests_total).

/** Sums webhook_requests_total by its `status` label. */
export function answersByStatus(metricsText: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of metricsText.split('\n')) {
    if (!line.startsWith('webhook_requests_total{')) continue;
    const status = /[{,]status="(\d{3})"/.exec(line)?.[1];
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (status === undefined || !Number.isFinite(value)) continue;
    out[status] = (out[status] ?? 0) + value;
  }
  return out;
}

export async function fetchIngressAnswers(url: string, timeoutMs = 2000): Promise<Record<string, number>> {
  const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  return answersByStatus(await response.text());
}
