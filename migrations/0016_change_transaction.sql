-- RedDot schema, part 16: the change feed follows a cursor instead of marking every record
-- (DESIGN §6a). Parts 16 to 19 make the switch; part 19 moves the feed over.
--
-- Each version of a user's own layer now records the transaction that wrote it. The feed keeps
-- one cursor (part 19): the highest `seq` it has published and the snapshot it read them in. A
-- record with a lower `seq` that was not visible in that snapshot (its transaction had not
-- committed yet) is found by its transaction id and published in the next round; nothing is
-- updated per record.
--
-- A new nullable column and a default: no row is rewritten. Records written before this part
-- have no transaction id; the feed has published them or part 19 places its cursor below them.
ALTER TABLE badge_change ADD COLUMN xid xid8;
ALTER TABLE badge_change ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
