// SPDX-License-Identifier: Apache-2.0

/// A failure reported by SQLite, or a misuse of the store API.
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The SQLite result code (extended), or -1 for errors raised by AFMStore itself.
    public var code: Int32
    /// SQLite's message (`sqlite3_errmsg`) or AFMStore's explanation.
    public var message: String
    /// The SQL being run, when there was one.
    public var sql: String?

    public init(code: Int32, message: String, sql: String? = nil) {
        self.code = code
        self.message = message
        self.sql = sql
    }

    /// Whether the database was locked by another connection beyond the busy timeout.
    public var isBusy: Bool { code & 0xFF == 5 || code & 0xFF == 6 }

    /// Whether a constraint (UNIQUE, FOREIGN KEY, CHECK, NOT NULL) failed.
    public var isConstraint: Bool { code & 0xFF == 19 }

    public var description: String {
        if let sql { return "SQLite error \(code): \(message) (in: \(sql.prefix(120)))" }
        return "SQLite error \(code): \(message)"
    }
}
