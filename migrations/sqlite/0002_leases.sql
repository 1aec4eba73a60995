-- The replica running a conversation holds a lease on it, and commands for a running
-- conversation wait here for its owner (see the PostgreSQL migration: on SQLite there is one
-- replica, the tables keep one code path).
ALTER TABLE conversations ADD COLUMN owner BLOB;
ALTER TABLE conversations ADD COLUMN lease_until INTEGER;
CREATE INDEX conversations_by_owner ON conversations (owner) WHERE owner IS NOT NULL;

CREATE TABLE conversation_commands (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX conversation_commands_by_conversation ON conversation_commands (conversation_id, seq);
