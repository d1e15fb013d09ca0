/// The keys ingest has applied, as one relation for tests to count: each user's event
/// (`applied_user_event_generation`, and `applied_user_event` where builds before migration 30
/// recorded it) and each broadcast (`applied_event`, audience 'all'), with the user
/// empty for a broadcast.
public enum AppliedKeys {
    /// A subquery with its alias, for `FROM`.
    public static let table = """
        (SELECT user_id, event_id, applied_at FROM applied_user_event_generation
         UNION ALL SELECT user_id, event_id, applied_at FROM applied_user_event
         UNION ALL SELECT '', event_id, applied_at FROM applied_event WHERE audience = 'all') AS applied_key
        """
}
