-- Several replicas on one database (issue 14): the replica running a conversation holds a
-- lease on it (renewed every few seconds; an expired one is taken over), and commands for a
-- running conversation (a message, pause, interrupt) sent to another replica wait here for
-- the owner, which is woken by NOTIFY triage_commands.
ALTER TABLE conversations ADD COLUMN owner uuid;
ALTER TABLE conversations ADD COLUMN lease_until bigint;
CREATE INDEX conversations_by_owner ON conversations (owner) WHERE owner IS NOT NULL;

CREATE TABLE conversation_commands (
    seq bigserial PRIMARY KEY,
    conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind text NOT NULL,
    payload text NOT NULL
);
CREATE INDEX conversation_commands_by_conversation ON conversation_commands (conversation_id, seq);
