-- RedDot schema, part 27: tombstones for each erased user, whichever way the user was erased
-- (issue 28). `DELETE /v1/users/{user}` and `reddot users erase` leave the marker; the change
-- feed then publishes a record with the user's key and no value (a Kafka tombstone: a
-- compacted topic drops every earlier record of that key) on the changes topic and stamps
-- `changes_tombstone_at`, and ingest's dead-letter publisher does the same on the dead-letter
-- topic (`dlq_tombstone_at`). Erasing the user again clears both stamps. Markers written before
-- this migration get their tombstones too. Nullable columns and indexes over the few markers
-- not yet published: online (erased_user is small).
ALTER TABLE erased_user ADD COLUMN changes_tombstone_at timestamptz, ADD COLUMN dlq_tombstone_at timestamptz;
CREATE INDEX erased_user_changes_tombstone_pending ON erased_user (erased_at) WHERE changes_tombstone_at IS NULL;
CREATE INDEX erased_user_dlq_tombstone_pending ON erased_user (erased_at) WHERE dlq_tombstone_at IS NULL;
