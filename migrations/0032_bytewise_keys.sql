-- RedDot schema, part 32: every text column in a key or an index compares byte by byte
-- (`COLLATE "C"`): user ids, event ids, action ids, item ids, device ids, webhook ids, and the
-- few text keys of the global tables.
--
-- Until now they took the database's collation. Under a linguistic one (`en_US.UTF-8`, the
-- default of many installers and hosted services; `C.UTF-8` too, which PostgreSQL 15 does not
-- treat as bytewise) every index step over a user id copied both strings and called the C
-- library's `strcoll` (12% of PostgreSQL's CPU samples in the live pipeline on an
-- `en_US.UTF-8` database). Measured there, the write pipeline's PostgreSQL time per event fell
-- by a quarter once its keys were bytewise; on `C.UTF-8`, ingest's by a sixth (BENCHMARKS.md,
-- "Keys that compare byte by byte"). Ids are opaque: nothing sorts them for a reader, so the
-- order they take (bytes, as a `C` database has always had) changes no answer.
--
-- Not online: each table is locked (ACCESS EXCLUSIVE) while its indexes are rebuilt in the new
-- order; no row is rewritten. Ingest, the rollup and the API wait meanwhile (and lose nothing).
-- Measured on this project's 2-core machine: about 2.5 s per million events retained, with
-- their users' state (the runbook, "Upgrades"). On a large database, apply it in a quiet hour.
--
-- A layout partitioned or distributed by user (docs/SHARDING.md) is left as it is, with a
-- notice: PostgreSQL refuses to alter a partition key's column and Citus a distribution
-- column's, and a mix (some keys bytewise, others not) would keep the planner from using the
-- unconverted tables' indexes for joins with the converted ones. There, create the tables with
-- the columns bytewise before partitioning (the runbook shows how), or keep the database's
-- collation. Every later migration declares such columns `COLLATE "C"` itself.
DO $$
BEGIN
    IF to_regclass('pg_dist_partition') IS NOT NULL OR EXISTS (
        SELECT 1 FROM pg_partitioned_table p
        JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = ANY (p.partattrs::int2[])
        WHERE a.attname = 'user_id'
    ) THEN
        RAISE NOTICE 'reddot migration 32: tables partitioned or distributed by user_id keep their collation (see the runbook, "Migrating")';
        RETURN;
    END IF;

    -- Every lock at once, before any index is rebuilt, so that the wait for them is bounded by
    -- lock_timeout as a whole and no table stays locked while the next one is awaited.
    LOCK TABLE consumer_offset, applied_event, applied_user_event, applied_user_event_generation,
               applied_action, applied_action_generation, user_write, dirty_mark, badge_delta,
               badge_state, badge_increment, badge_item, badge_clear_mark, badge_seen_mark, badge_mute,
               badge_aggregate, user_version, badge_change, broadcast, broadcast_clear, broadcast_seen,
               erased_user, rejected_record, aggregation_mode, push_device, push_user,
               webhook_subscription, webhook_user, webhook_delivery
        IN ACCESS EXCLUSIVE MODE;

    ALTER TABLE consumer_offset
        ALTER COLUMN consumer_group TYPE text COLLATE "C", ALTER COLUMN topic TYPE text COLLATE "C";
    ALTER TABLE applied_event ALTER COLUMN event_id TYPE text COLLATE "C";
    ALTER TABLE applied_user_event
        ALTER COLUMN user_id TYPE text COLLATE "C", ALTER COLUMN event_id TYPE text COLLATE "C";
    ALTER TABLE applied_user_event_generation
        ALTER COLUMN user_id TYPE text COLLATE "C", ALTER COLUMN event_id TYPE text COLLATE "C";
    ALTER TABLE applied_action
        ALTER COLUMN user_id TYPE text COLLATE "C", ALTER COLUMN action_id TYPE text COLLATE "C";
    ALTER TABLE applied_action_generation
        ALTER COLUMN user_id TYPE text COLLATE "C", ALTER COLUMN action_id TYPE text COLLATE "C";
    ALTER TABLE user_write ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE dirty_mark ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE badge_delta ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE badge_state ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE badge_increment ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE badge_item ALTER COLUMN user_id TYPE text COLLATE "C", ALTER COLUMN item TYPE text COLLATE "C";
    ALTER TABLE badge_clear_mark ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE badge_seen_mark ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE badge_mute ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE badge_aggregate ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE user_version ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE badge_change ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE broadcast ALTER COLUMN event_id TYPE text COLLATE "C";
    ALTER TABLE broadcast_clear ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE broadcast_seen ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE erased_user ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE rejected_record
        ALTER COLUMN topic TYPE text COLLATE "C", ALTER COLUMN reason TYPE text COLLATE "C";
    ALTER TABLE aggregation_mode ALTER COLUMN pattern TYPE text COLLATE "C";
    ALTER TABLE push_device
        ALTER COLUMN user_id TYPE text COLLATE "C", ALTER COLUMN device_id TYPE text COLLATE "C";
    ALTER TABLE push_user ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE webhook_subscription ALTER COLUMN id TYPE text COLLATE "C";
    ALTER TABLE webhook_user ALTER COLUMN user_id TYPE text COLLATE "C";
    ALTER TABLE webhook_delivery
        ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN user_id TYPE text COLLATE "C",
        ALTER COLUMN subscription_id TYPE text COLLATE "C";
END
$$;
