-- The outbox contract: an application creates a task inside its own transaction with
--
--     INSERT INTO backstop.tasks (kind, key, payload) VALUES ($1, $2, convert_to($3, 'UTF8'))
--         ON CONFLICT (kind, key) DO NOTHING
--
-- so every other column needs a default. 0001 gave them all one but the id; and max_attempts
-- defaulted to 8 whatever the kind's limit. Now:
--   id            a UUIDv7 (RFC 9562): gen_random_uuid()'s 16 random bytes (PostgreSQL 13+)
--                 with the first 48 bits replaced by the Unix time in milliseconds and the
--                 version nibble turned from 4 into 7 (bits 52 and 53, counted from the
--                 least significant bit of each byte, as set_bit does);
--   max_attempts  0, "the kind's limit": the first claim writes the kind's max_attempts.
-- Changing a default rewrites no rows and takes only a brief lock.
ALTER TABLE {schema}.tasks
    ALTER COLUMN id SET DEFAULT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
        PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
        FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
    ALTER COLUMN max_attempts SET DEFAULT 0;
