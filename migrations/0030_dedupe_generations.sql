-- RedDot schema, part 30: users' event ids and clients' action ids kept in two generations that
-- are emptied whole (issue 25: bounded state; retention by dropped time partitions, not deletes
-- row by row).
--
-- `applied_user_event_generation` holds, per user, the ids of the events applied to that user,
-- in two list partitions (`slot` 0 and 1). `dedupe_generation` counts the generations and says
-- when the current one started; its slot is `generation % 2`. Ingest writes its keys into the
-- current slot and finds earlier ones in either slot. Once the current generation is older
-- than the dedupe retention, ingest starts the next one: the slot it takes holds the
-- generation before the current one, whose ids are all older than the retention, and is
-- emptied with `TRUNCATE` (one file unlinked, no dead rows, no vacuum). So every id is kept at
-- least the retention and at most twice it.
--
-- Writers read the generation with `FOR SHARE`; the rotation's `UPDATE` waits for them and
-- they for it, so no writer puts a key in the slot being emptied, and each writer's later
-- statements see every key committed before the rotation.
--
-- Online: new tables, and a trigger on `applied_user_event` (parts 20 and 21). That table
-- stays: this build still looks for ids there, which builds before this part wrote, and prunes
-- it row by row until it is empty; a later part drops it. It takes no new rows: an ingest of an
-- earlier build still running after this part would record ids only there and miss this
-- build's, so its batches fail (and roll back, its offsets unmoved) with a message to upgrade it
-- until it is replaced. Nothing is lost or applied twice; its partitions wait.
CREATE TABLE dedupe_generation (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    generation  bigint      NOT NULL CHECK (generation >= 0),
    started_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO dedupe_generation (generation) VALUES (0);

CREATE TABLE applied_user_event_generation (
    user_id     text        NOT NULL,
    event_id    text        NOT NULL,
    slot        smallint    NOT NULL CHECK (slot IN (0, 1)),
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, event_id, slot)
) PARTITION BY LIST (slot);
CREATE TABLE applied_user_event_generation_slot0 PARTITION OF applied_user_event_generation FOR VALUES IN (0);
CREATE TABLE applied_user_event_generation_slot1 PARTITION OF applied_user_event_generation FOR VALUES IN (1);

-- The clients' action ids (part 9's `applied_action`), in the same generations: an action's id
-- is written into the current slot with the action and looked for in both. `applied_action`
-- keeps working for `reddot serve` of earlier builds during a rolling update (they neither
-- write nor read this table: an action repeated to one of them after this build applied it is
-- applied again, which a clear or a seen at the same version makes a no-op); this build reads
-- it too and prunes it row by row.
CREATE TABLE applied_action_generation (
    user_id     text        NOT NULL,
    action_id   text        NOT NULL,
    slot        smallint    NOT NULL CHECK (slot IN (0, 1)),
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, action_id, slot)
) PARTITION BY LIST (slot);
CREATE TABLE applied_action_generation_slot0 PARTITION OF applied_action_generation FOR VALUES IN (0);
CREATE TABLE applied_action_generation_slot1 PARTITION OF applied_action_generation FOR VALUES IN (1);

CREATE FUNCTION applied_user_event_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'applied_user_event takes no new event ids since migration 30: this reddot ingest is older than the schema; upgrade it'
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'its batches roll back and its offsets stay; the upgraded ingest applies them once';
END
$$;
CREATE TRIGGER applied_user_event_closed BEFORE INSERT ON applied_user_event
    FOR EACH STATEMENT EXECUTE FUNCTION applied_user_event_closed();
