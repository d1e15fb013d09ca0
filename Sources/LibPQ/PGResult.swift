/// The rows of a finished statement, copied out of libpq (the `PGresult` is already cleared).
public struct PGResult: Sendable {
    /// Column names, in order.
    public let columns: [String]
    /// Rows in text format; `nil` is SQL `NULL`.
    public let rows: [PGRow]
    /// The count from the command tag (`INSERT 0 5` → 5), or 0 when it has none.
    public let affectedRows: Int
    /// The statement's name, for error messages.
    public let statement: String?

    /// Creates a result (used by the connection and by tests).
    public init(columns: [String], rows: [PGRow], affectedRows: Int, statement: String?) {
        self.columns = columns
        self.rows = rows
        self.affectedRows = affectedRows
        self.statement = statement
    }

    /// The only row, or an error when there is none or more than one.
    public func singleRow() throws(PGError) -> PGRow {
        guard rows.count == 1 else {
            throw PGError(
                code: .decoding, message: "expected exactly one row, got \(rows.count)", statement: statement)
        }
        return rows[0]
    }
}

/// One row of a `PGResult`.
public struct PGRow: Sendable {
    /// The column values in text format; `nil` is SQL `NULL`.
    public let values: [String?]
    let statement: String?

    /// Creates a row.
    public init(values: [String?], statement: String? = nil) {
        self.values = values
        self.statement = statement
    }

    /// Decodes column `index` as `T`; throws `PGError.Code.decoding` on a mismatch or a missing column.
    public func decode<T: PGDecodable>(_ index: Int, as type: T.Type = T.self) throws(PGError) -> T {
        guard values.indices.contains(index) else {
            throw PGError(code: .decoding, message: "no column \(index) in a row of \(values.count)", statement: statement)
        }
        do {
            return try T.decode(pgText: values[index])
        } catch {
            var error = error
            error.statement = statement
            error.message += " (column \(index))"
            throw error
        }
    }
}
