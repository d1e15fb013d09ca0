-- RedDot's tables on Citus, distributed by user: NOT a supported configuration yet. This file
-- runs on Citus 13.2 as written (deploy/citus/test.sh runs it for every test database there);
-- every part of RedDot runs on the result, taking forms Citus accepts where it is installed
-- (docs/SHARDING.md, "What Citus refuses"; issue 27); nothing is measured for speed there. A test (`SchemaLayoutTests.citusLayoutCoversTheSchema`) keeps this
-- file's table lists equal to the schema's: every table with a `user_id` is distributed by it,
-- colocated with `user_version`, and every other table is a reference table or stays on the
-- coordinator.
--
-- Run once, on the coordinator, after `reddot migrate up` and before any data is written:
--   psql "$REDDOT_DATABASE_URL" -v ON_ERROR_STOP=1 -f deploy/citus/layout.sql
-- (deploy/citus/compose.yaml's one-shot citus-layout runs it so, once, after registering the
-- workers.)
--
-- Coordinator-local (written per batch or per round, not per user; not distributed):
--   consumer_offset, rejected_record, change_feed_lease, reddot_schema_migrations

-- Global and small, read with every user's rows: one copy on every node. Written rarely
-- (broadcasts, their versions and log, declared modes, broadcasts' event ids).
SELECT create_reference_table('broadcast');
SELECT create_reference_table('broadcast_version');
SELECT create_reference_table('broadcast_change');
SELECT create_reference_table('aggregation_mode');
SELECT create_reference_table('applied_event');
-- One row: the dedupe generation. Ingest reads it FOR SHARE per batch; the rotation locks it.
SELECT create_reference_table('dedupe_generation');
SELECT create_reference_table('webhook_subscription');

-- Per user, in one colocation group: a user's rows of every table sit on one shard.
SELECT create_distributed_table('user_version', 'user_id');
SELECT create_distributed_table('user_write', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('badge_state', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('badge_aggregate', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('badge_item', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('badge_increment', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('badge_delta', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('badge_clear_mark', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('badge_seen_mark', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('badge_mute', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('badge_change', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('dirty_mark', 'user_id', colocate_with => 'user_version');
-- A new install has no ingest older than migration 30, and Citus refuses to distribute a table
-- with a trigger (unless citus.enable_unsafe_triggers): drop the one that stops such an ingest.
DROP TRIGGER IF EXISTS applied_user_event_closed ON applied_user_event;
SELECT create_distributed_table('applied_user_event', 'user_id', colocate_with => 'user_version');
-- Partitioned by the dedupe slot: Citus distributes each slot's partition by user too, and a
-- rotation's TRUNCATE of one slot truncates its shards.
SELECT create_distributed_table('applied_user_event_generation', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('applied_action', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('applied_action_generation', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('broadcast_clear', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('broadcast_seen', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('erased_user', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('webhook_user', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('webhook_delivery', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('push_device', 'user_id', colocate_with => 'user_version');
SELECT create_distributed_table('push_user', 'user_id', colocate_with => 'user_version');

-- The change feed's order (docs/SHARDING.md, "The change feed on Citus"): the feed's cursor is a
-- `seq` and a snapshot, which order transactions on one server only. So on Citus each rollup
-- round also writes the users' versions it logged here, on the coordinator (not distributed),
-- and the feed reads their numbers here and their records from the distributed log; an entry
-- goes once the feed has published it (or with its record: the retention, an erasure). Numbered
-- from above the feed's cursor, so that nothing is taken as published.
CREATE TABLE change_feed_outbox (
    seq      bigserial   PRIMARY KEY,
    user_id  text        COLLATE "C" NOT NULL,
    version  bigint      NOT NULL,
    xid      xid8        NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX change_feed_outbox_xid ON change_feed_outbox (xid, seq);
CREATE INDEX change_feed_outbox_user ON change_feed_outbox (user_id, version);
SELECT setval(pg_get_serial_sequence('change_feed_outbox', 'seq'), greatest((SELECT published_seq FROM change_feed_lease), 0) + 1, false);

-- The functions RedDot's statements call (the fold of a debited counter, the visible root under
-- modes and mutes), on every node: a statement for the users of one shard runs whole on that
-- shard's worker (docs/SHARDING.md, rule 10). Citus then propagates their later changes.
SELECT create_distributed_function(p.oid::regprocedure)
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace AND p.proname IN (
    'badge_fold_step', 'badge_fold', 'badge_mode_of', 'badge_plain_root', 'badge_visible_root', 'badge_visible_root_node')
ORDER BY p.proname <> 'badge_fold_step', p.proname;
