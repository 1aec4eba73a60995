-- Outbound webhooks (issue 15): every delivery a receiver is owed, written in the same
-- transaction as the events or the conversation change it reports, deleted once delivered.
-- `seq` orders each (receiver, conversation) queue; `delivery_id` is the receiver's
-- idempotency key, fixed when the row is written and kept across retries. Claims
-- (`claimed_by` until `claim_until`) let exactly one replica send a delivery at a time. See
-- src/webhooks/mod.rs for the design.
CREATE TABLE webhook_outbox (
    seq bigserial PRIMARY KEY,
    delivery_id uuid NOT NULL UNIQUE,
    receiver text NOT NULL,
    conversation_id uuid NOT NULL,
    kind text NOT NULL,
    body text NOT NULL,
    sequence bigint NOT NULL,
    event_count bigint NOT NULL,
    sealed bigint NOT NULL DEFAULT 0,
    status text NOT NULL DEFAULT 'pending',
    attempts bigint NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    age_from bigint NOT NULL,
    next_attempt_at bigint NOT NULL,
    claimed_by uuid,
    claim_until bigint,
    last_error text,
    last_status bigint
);
CREATE INDEX webhook_outbox_queue ON webhook_outbox (receiver, conversation_id, seq)
    WHERE status = 'pending';
CREATE INDEX webhook_outbox_by_status ON webhook_outbox (status, seq);

-- Webhooks in: the reply token of the state a conversation waits in (its SHA-256, hex; the
-- token itself is only in the deliveries that carry it), and every inbound event: the audit
-- trail, duplicates (same token and event key) answered from it, early events kept here
-- until the state they are for is entered.
ALTER TABLE conversations ADD COLUMN reply_token_hash text;
ALTER TABLE conversations ADD COLUMN reply_state text;
-- 1 once the conversation entered that state (an event for it before then is early).
ALTER TABLE conversations ADD COLUMN reply_entered bigint NOT NULL DEFAULT 0;
CREATE TABLE webhook_inbound (
    seq bigserial PRIMARY KEY,
    conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    token_hash text NOT NULL,
    state_name text NOT NULL,
    event_key text NOT NULL,
    data text NOT NULL,
    source text NOT NULL,
    received_at bigint NOT NULL,
    status text NOT NULL,
    answer text NOT NULL,
    UNIQUE (conversation_id, token_hash, event_key)
);
