-- The whole initial schema: the inbox (every delivery the worker has seen), the current state per
-- resource, and the outbox the relay publishes to the applied topic.

CREATE TABLE inbox_events (
  event_id          text PRIMARY KEY,
  idempotency_key   text,
  -- Set when this event_id repeats a business effect (same idempotency_key) already recorded.
  duplicate_of      text,
  tenant_id         text,
  resource_type     text,
  resource_id       text,
  resource_version  bigint,
  event_type        text,
  status            text NOT NULL CHECK (status IN (
                      'received', 'applied', 'stale', 'duplicate', 'duplicate_version',
                      'quarantined', 'retrying', 'dead_lettered')),
  reason            text,
  attempts          integer NOT NULL DEFAULT 1,
  last_error        text,
  body_sha256       text NOT NULL,
  -- The raw body exactly as consumed, so a DLQ replay or a reprocess can feed it again.
  payload           text NOT NULL,
  source_topic      text,
  source_partition  integer,
  source_offset     bigint,
  occurred_at       timestamptz,
  received_at       timestamptz,
  first_seen_at     timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now()
);

-- One business effect per tenant: a re-publish under a new event_id is recorded with duplicate_of set.
CREATE UNIQUE INDEX inbox_events_idempotency_key
  ON inbox_events (tenant_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL AND duplicate_of IS NULL;

-- trace: one resource's deliveries in version order.
CREATE INDEX inbox_events_resource
  ON inbox_events (tenant_id, resource_type, resource_id, resource_version);

-- Operators list what needs attention without scanning the whole inbox.
CREATE INDEX inbox_events_attention
  ON inbox_events (status, updated_at)
  WHERE status IN ('received', 'quarantined', 'retrying', 'dead_lettered');

-- A delivery whose event_id is already known with a different body: the second body is kept here,
-- the original inbox row stays as it was.
CREATE TABLE inbox_anomalies (
  id                    bigserial PRIMARY KEY,
  event_id              text NOT NULL,
  kind                  text NOT NULL DEFAULT 'body_mismatch',
  status                text NOT NULL DEFAULT 'quarantined'
                          CHECK (status IN ('quarantined', 'dead_lettered', 'resolved')),
  body_sha256           text NOT NULL,
  original_body_sha256  text,
  payload               text NOT NULL,
  tenant_id             text,
  resource_type         text,
  resource_id           text,
  resource_version      bigint,
  source_topic          text,
  source_partition      integer,
  source_offset         bigint,
  detected_at           timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now(),
  UNIQUE (event_id, body_sha256)
);

CREATE INDEX inbox_anomalies_resource ON inbox_anomalies (tenant_id, resource_type, resource_id);

CREATE TABLE resource_state (
  tenant_id      text NOT NULL,
  resource_type  text NOT NULL,
  resource_id    text NOT NULL,
  version        bigint NOT NULL,
  -- A tombstone keeps its version, so a late lower-versioned update can never resurrect the resource.
  deleted        boolean NOT NULL DEFAULT false,
  data           jsonb,
  last_event_id  text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, resource_type, resource_id)
);

CREATE TABLE applied_outbox (
  id            bigserial PRIMARY KEY,
  event_id      text NOT NULL,
  -- Kafka key, identical to the events topic key: <tenant>/<type>/<id>.
  key           text NOT NULL,
  -- Serialised once at apply time; the relay publishes these exact bytes, so a republish is identical.
  payload       text NOT NULL,
  headers       jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  published_at  timestamptz
);

CREATE INDEX applied_outbox_unpublished ON applied_outbox (id) WHERE published_at IS NULL;
CREATE INDEX applied_outbox_key ON applied_outbox (key, id);
