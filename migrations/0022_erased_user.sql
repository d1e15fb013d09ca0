-- RedDot schema, part 22: users erased on request (issue 28, "a user's data on request").
-- `reddot users erase` and `DELETE /v1/users/{user}` remove every row of the user and leave
-- this marker: the user's id and when. Ingest drops events for a marked user (an event still in
-- Kafka must not bring the tree back), until the marker is as old as the dedupe retention;
-- ingest's prune then deletes it. A new table: online.
CREATE TABLE erased_user (
    user_id    text        PRIMARY KEY,
    erased_at  timestamptz NOT NULL DEFAULT now()
);
