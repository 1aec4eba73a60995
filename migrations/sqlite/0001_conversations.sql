-- Conversations (issue 14): one row each, plus the append-only event log.
-- Timestamps are microseconds since the Unix epoch (UTC), so that both backends compare and
-- page them the same way. JSON values are stored as the text the service serialised.
CREATE TABLE conversations (
    id BLOB PRIMARY KEY NOT NULL,
    title TEXT,
    tags TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    config TEXT NOT NULL,
    state TEXT NOT NULL,
    state_event_id INTEGER NOT NULL,
    stats TEXT NOT NULL,
    last_event_id INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX conversations_by_created ON conversations (created_at, id);
CREATE INDEX conversations_by_updated ON conversations (updated_at, id);
CREATE INDEX conversations_by_status_created ON conversations (status, created_at, id);
CREATE INDEX conversations_by_status_updated ON conversations (status, updated_at, id);

CREATE TABLE events (
    conversation_id BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    timestamp INTEGER NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
