-- RedDot schema, part 14: broadcasts counted under the user's modes and mutes (DESIGN §2,
-- Broadcasts).
--
-- A broadcast counts for a user as if it were own state of its node: its count goes up the
-- chain of its ancestors as each node passes to its parent under the aggregation modes, and a
-- node the user muted passes nothing. The API merges broadcasts into trees that way
-- (BadgeAggregate.merge in BadgeCore); the change log's root totals (the app-icon number of the
-- change feed) come from this function, the same steps over the root's chain.
--
-- New functions only: no table changes. Processes of an older build log root totals that add
-- every broadcast to the root, as before.

-- The visible root totals {count, unseen} of user `p_user` at a new version: the own root
-- (`p_own_count`, `p_own_unseen`; NULL when the root does not show) with the active broadcasts
-- the user has not dismissed merged in, in id order (a broadcast seen adds no unseen; dismissals
-- and seens count when numbered up to `p_through`, the version's writes). `p_changed` holds the
-- aggregates the version changed ({path: [count, unseen] or null when the node no longer shows}),
-- newer than the table's rows in the same statement; `p_mutes` the version's muted nodes
-- (`[[path, until], ...]`). Sums stop at the largest bigint. The steps are those of
-- BadgeAggregate.merge: at its node a broadcast adds its count under `sum` and `exclude` and
-- nothing under `children` and `dot`; a child passes its count and unseen to a `sum` or
-- `exclude` parent unless it is `dot` or `exclude`; a `children` parent counts a child that was
-- not shown before and, once, its unseen; a `dot` parent takes nothing; a muted node passes
-- nothing. A broadcast whose chain has no muted node and no node with another mode than `sum`
-- skips the steps: its count reaches the root whole (that is what the steps give it).
CREATE FUNCTION badge_visible_root(
    p_user text, p_own_count bigint, p_own_unseen bigint, p_through bigint, p_changed jsonb, p_mutes jsonb
) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    biggest constant numeric := 9223372036854775807;
    -- The nodes looked at so far: path -> [count, unseen], or JSON null when not shown.
    known jsonb := jsonb_build_object('root', CASE WHEN p_own_count IS NULL THEN 'null'::jsonb
                                                   ELSE jsonb_build_array(p_own_count, coalesce(p_own_unseen, 0)) END);
    muted ltree[] := ARRAY(SELECT (e->>0)::ltree FROM jsonb_array_elements(coalesce(p_mutes, '[]')) AS e);
    b record;
    node ltree;
    parent ltree;
    before jsonb;
    after jsonb;
    parent_before jsonb;
    parent_after jsonb;
    node_mode text;
    parent_mode text;
    grown numeric;
    -- What the broadcasts on plain chains add to the root.
    plain_count numeric := 0;
    plain_unseen numeric := 0;
BEGIN
    -- Without mutes or modes every node sums.
    IF jsonb_array_length(coalesce(p_mutes, '[]')) = 0 AND NOT EXISTS (SELECT 1 FROM aggregation_mode m WHERE m.mode <> 'sum') THEN
        RETURN (SELECT ARRAY[p.count, p.unseen] FROM badge_plain_root(p_user, p_own_count, p_own_unseen, p_through) AS p);
    END IF;
    FOR b IN
        SELECT x.path, x.count,
               CASE WHEN EXISTS (SELECT 1 FROM broadcast_seen s
                                 WHERE s.user_id = p_user AND s.broadcast_id = x.id AND s.shown_in <= p_through)
                    THEN 0 ELSE x.count END AS unseen,
               -- No node of its chain is muted or has a mode other than sum: its count reaches
               -- the root whole, and passes no node that another broadcast's steps look at.
               NOT (muted @> x.path) AND NOT EXISTS (
                   SELECT 1 FROM aggregation_mode m WHERE m.mode <> 'sum' AND x.path ~ m.below) AS plain
        FROM broadcast x
        WHERE x.withdrawn_at IS NULL AND NOT EXISTS (
            SELECT 1 FROM broadcast_clear c WHERE c.user_id = p_user AND c.broadcast_id = x.id AND c.shown_in <= p_through)
        ORDER BY x.id
    LOOP
        IF b.plain THEN
            plain_count := plain_count + b.count;
            plain_unseen := plain_unseen + b.unseen;
            CONTINUE;
        END IF;
        node := b.path;
        before := badge_visible_root_node(p_user, node, known, p_changed);
        node_mode := badge_mode_of(node);
        IF jsonb_typeof(before) = 'null' THEN after := '[0, 0]'; ELSE after := before; END IF;
        IF node_mode IN ('sum', 'exclude') THEN
            after := jsonb_build_array(least((after->>0)::numeric + b.count, biggest),
                                       least((after->>1)::numeric + b.unseen, biggest));
        END IF;
        known := known || jsonb_build_object(node::text, after);
        WHILE nlevel(node) > 1 AND NOT node = ANY(muted) LOOP
            parent := subpath(node, 0, nlevel(node) - 1);
            parent_before := badge_visible_root_node(p_user, parent, known, p_changed);
            IF jsonb_typeof(parent_before) = 'null' THEN parent_after := '[0, 0]'; ELSE parent_after := parent_before; END IF;
            parent_mode := badge_mode_of(parent);
            IF parent_mode = 'children' AND node_mode <> 'exclude' THEN
                parent_after := jsonb_build_array(
                    least((parent_after->>0)::numeric + CASE WHEN jsonb_typeof(before) = 'null' THEN 1 ELSE 0 END, biggest),
                    least((parent_after->>1)::numeric
                          + CASE WHEN coalesce((before->>1)::numeric, 0) = 0 AND (after->>1)::numeric > 0 THEN 1 ELSE 0 END,
                          biggest));
            ELSIF parent_mode IN ('sum', 'exclude') AND node_mode IN ('sum', 'children') THEN
                grown := (after->>0)::numeric - coalesce((before->>0)::numeric, 0);
                parent_after := jsonb_build_array(
                    least((parent_after->>0)::numeric + greatest(grown, 0), biggest),
                    least((parent_after->>1)::numeric
                          + greatest((after->>1)::numeric - coalesce((before->>1)::numeric, 0), 0), biggest));
            END IF;
            -- A parent that showed and did not change changes nothing above it.
            EXIT WHEN parent_before = parent_after;
            known := known || jsonb_build_object(parent::text, parent_after);
            node := parent;
            node_mode := parent_mode;
            before := parent_before;
            after := parent_after;
        END LOOP;
    END LOOP;
    RETURN ARRAY[least(coalesce((known->'root'->>0)::numeric, 0) + plain_count, biggest),
                 least(coalesce((known->'root'->>1)::numeric, 0) + plain_unseen, biggest)]::bigint[];
END
$$;

-- The root totals when every node sums (no mutes, no modes): the own root (NULL: not shown) plus
-- every active broadcast the user has not dismissed, and its unseen unless the user saw it. One
-- row; a table function of one SELECT, so that PostgreSQL inlines it where it is called in FROM.
CREATE FUNCTION badge_plain_root(p_user text, p_own_count bigint, p_own_unseen bigint, p_through bigint)
RETURNS TABLE (count bigint, unseen bigint)
LANGUAGE sql STABLE AS $$
    SELECT least(coalesce(p_own_count, 0)::numeric + coalesce(sum(x.count), 0), 9223372036854775807)::bigint,
           least(coalesce(p_own_unseen, 0)::numeric + coalesce(sum(x.count) FILTER (WHERE NOT EXISTS (
               SELECT 1 FROM broadcast_seen s WHERE s.user_id = p_user AND s.broadcast_id = x.id AND s.shown_in <= p_through)), 0),
                 9223372036854775807)::bigint
    FROM broadcast x
    WHERE x.withdrawn_at IS NULL AND NOT EXISTS (
        SELECT 1 FROM broadcast_clear c WHERE c.user_id = p_user AND c.broadcast_id = x.id AND c.shown_in <= p_through)
$$;

-- The aggregate of `node` for badge_visible_root: as looked at so far (`known`), else as the
-- version changed it (`changed`), else as stored; JSON null when it does not show.
CREATE FUNCTION badge_visible_root_node(p_user text, node ltree, known jsonb, changed jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN known ? node::text THEN known->node::text
        WHEN coalesce(changed, '{}') ? node::text THEN changed->node::text
        ELSE coalesce((SELECT jsonb_build_array(a.count, a.unseen) FROM badge_aggregate a
                       WHERE a.user_id = p_user AND a.path = node), 'null'::jsonb)
    END
$$;

-- The aggregation mode of `node`: the first stored pattern that matches it, else sum.
CREATE FUNCTION badge_mode_of(node ltree) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT m.mode FROM aggregation_mode m WHERE node ~ m.query ORDER BY m.position LIMIT 1), 'sum')
$$;
