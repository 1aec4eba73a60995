-- Conversations (issue 14): one row each, plus the append-only event log.
-- Timestamps are microseconds since the Unix epoch (UTC), as on SQLite, so both backends run
-- the same queries. JSON values are text: stored exactly as serialised (the `body` filter
-- searches that text), never queried inside.
CREATE TABLE conversations (
    id uuid PRIMARY KEY,
    title text,
    tags text NOT NULL,
    status text NOT NULL,
    reason text,
    config text NOT NULL,
    state text NOT NULL,
    state_event_id bigint NOT NULL,
    stats text NOT NULL,
    last_event_id bigint NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);
CREATE INDEX conversations_by_created ON conversations (created_at, id);
CREATE INDEX conversations_by_updated ON conversations (updated_at, id);
CREATE INDEX conversations_by_status_created ON conversations (status, created_at, id);
CREATE INDEX conversations_by_status_updated ON conversations (status, updated_at, id);

CREATE TABLE events (
    conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    kind text NOT NULL,
    source text NOT NULL,
    timestamp bigint NOT NULL,
    payload text NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
