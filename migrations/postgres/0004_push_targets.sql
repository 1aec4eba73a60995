-- Push notification targets (A2A's push notification configs, issue 37): a URL a client asked
-- to be told of a conversation's status changes at. Each is a receiver of the webhook outbox
-- of its own, named `receiver` (`push/{conversation_id}/{target_id}`): the appender writes a
-- snapshot delivery for it with every status change, in the change's transaction. `secrets` is
-- the sealed envelope (see src/store/sealing.rs) of the token and credentials sent with them.
CREATE TABLE push_targets (
    conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    target_id text NOT NULL,
    receiver text NOT NULL UNIQUE,
    url text NOT NULL,
    scheme text,
    secrets text NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (conversation_id, target_id)
);
