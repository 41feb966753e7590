-- Sources as data: who may send, managed while the bridge runs (shared/domain/sources/catalog.ts).
-- spec: the source without its secrets, as storedSourceSchema validates it (the same schema as the
-- sources file, strict schemas inline). revision: bumped by every write of the source; a write
-- carries the revision it read and is refused (412) when another came first.
CREATE TABLE bridge_sources (
  id text PRIMARY KEY,
  spec jsonb NOT NULL,
  enabled boolean NOT NULL DEFAULT true,
  revision bigint NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- A signing secret, sealed with AES-256-GCM under the key key_id names (nonce || ciphertext || tag,
-- the source and secret ids as associated data, so a sealed value cannot be moved to another row).
-- last_verified_at: written by the ingresses now and then, never part of the configuration version.
CREATE TABLE bridge_source_secrets (
  source_id text NOT NULL REFERENCES bridge_sources (id) ON DELETE CASCADE,
  secret_id text NOT NULL,
  key_id text NOT NULL,
  sealed bytea NOT NULL,
  retire_after timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_verified_at timestamptz,
  PRIMARY KEY (source_id, secret_id)
);

-- One number for the whole configuration: every write bumps it in its transaction and notifies
-- channel bridge_config; every ingress and worker exports the version it serves.
CREATE TABLE bridge_config (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version bigint NOT NULL
);
INSERT INTO bridge_config (singleton, version) VALUES (true, 0);

-- Who changed what, when: one row per write, in the write's transaction. diff never holds secret
-- material (a secret appears by id, key id and retire time).
CREATE TABLE bridge_audit_log (
  id bigserial PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  actor text NOT NULL,
  action text NOT NULL,
  source_id text,
  config_version bigint NOT NULL,
  diff jsonb NOT NULL
);
CREATE INDEX bridge_audit_log_source ON bridge_audit_log (source_id, id);

-- Named operator tokens for the operator API, stored as SHA-256 digests (a token is 32 random
-- bytes, so a plain digest is enough); read may only read, write may change sources.
CREATE TABLE bridge_operator_tokens (
  name text PRIMARY KEY,
  token_sha256 bytea NOT NULL UNIQUE,
  scope text NOT NULL CHECK (scope IN ('read', 'write')),
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz,
  last_used_at timestamptz
);

-- What configuration version each running ingress and worker serves, written by each every few
-- seconds: the console shows a laggard. Rows of instances gone for an hour are dropped.
CREATE TABLE bridge_config_instances (
  instance text PRIMARY KEY,
  role text NOT NULL,
  config_version bigint NOT NULL,
  seen_at timestamptz NOT NULL DEFAULT now()
);
