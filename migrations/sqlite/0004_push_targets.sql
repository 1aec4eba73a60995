-- Push notification targets (A2A's push notification configs, issue 37): a URL a client asked
-- to be told of a conversation's status changes at. Each is a receiver of the webhook outbox
-- of its own, named `receiver` (`push/{conversation_id}/{target_id}`): the appender writes a
-- snapshot delivery for it with every status change, in the change's transaction. `secrets` is
-- the sealed envelope (see src/store/sealing.rs) of the token and credentials sent with them.
CREATE TABLE push_targets (
    conversation_id BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    target_id TEXT NOT NULL,
    receiver TEXT NOT NULL UNIQUE,
    url TEXT NOT NULL,
    scheme TEXT,
    secrets TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, target_id)
);
