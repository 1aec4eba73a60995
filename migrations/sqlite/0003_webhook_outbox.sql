-- Outbound webhooks (issue 15): every delivery a receiver is owed, written in the same
-- transaction as the events or the conversation change it reports, deleted once delivered.
-- `seq` orders each (receiver, conversation) queue; `delivery_id` is the receiver's
-- idempotency key, fixed when the row is written and kept across retries. See
-- src/webhooks/mod.rs for the design.
CREATE TABLE webhook_outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id BLOB NOT NULL UNIQUE,
    receiver TEXT NOT NULL,
    conversation_id BLOB NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    event_count INTEGER NOT NULL,
    sealed INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    age_from INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    claimed_by BLOB,
    claim_until INTEGER,
    last_error TEXT,
    last_status INTEGER
);
CREATE INDEX webhook_outbox_queue ON webhook_outbox (receiver, conversation_id, seq)
    WHERE status = 'pending';
CREATE INDEX webhook_outbox_by_status ON webhook_outbox (status, seq);

-- Webhooks in: the reply token of the state a conversation waits in (its SHA-256, hex; the
-- token itself is only in the deliveries that carry it), and every inbound event: the audit
-- trail, duplicates (same token and event key) answered from it, early events kept here
-- until the state they are for is entered.
ALTER TABLE conversations ADD COLUMN reply_token_hash TEXT;
ALTER TABLE conversations ADD COLUMN reply_state TEXT;
-- 1 once the conversation entered that state (an event for it before then is early).
ALTER TABLE conversations ADD COLUMN reply_entered INTEGER NOT NULL DEFAULT 0;
CREATE TABLE webhook_inbound (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    token_hash TEXT NOT NULL,
    state_name TEXT NOT NULL,
    event_key TEXT NOT NULL,
    data TEXT NOT NULL,
    source TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    status TEXT NOT NULL,
    answer TEXT NOT NULL,
    UNIQUE (conversation_id, token_hash, event_key)
);
