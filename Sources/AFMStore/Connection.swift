// SPDX-License-Identifier: Apache-2.0
private import CSQLite

/// One SQLite database connection: WAL journal, foreign keys on, a busy timeout, and transactions.
///
/// A connection is used from one thread at a time (it is not `Sendable`); programs that share a database open
/// one connection per thread. Every call blocks while SQLite works, so call it from a dedicated thread or from
/// synchronous code, never from the cooperative pool.
///
/// ```swift
/// let db = try Connection(path: "history.sqlite")
/// try db.migrate([Migration(version: 1, name: "create", sql: "CREATE TABLE t(x)")])
/// try db.transaction { try db.execute("INSERT INTO t VALUES (?)", [1]) }
/// ```
public final class Connection {
    // The handle is owned by this object and closed in deinit.
    let handle: OpaquePointer
    /// The file this connection opened (":memory:" for an in-memory database).
    public let path: String
    private var transactionDepth = 0

    /// Opens (creating if needed) the database at `path`.
    ///
    /// - Parameters:
    ///   - path: a file path, or ":memory:".
    ///   - busyTimeoutMilliseconds: how long a statement waits for another connection's write lock.
    /// - Throws: ``StoreError`` when the file cannot be opened or is not a database.
    public init(path: String, busyTimeoutMilliseconds: Int32 = 5_000) throws {
        var pointer: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let status = sqlite3_open_v2(path, &pointer, flags, nil)
        guard status == SQLITE_OK, let pointer else {
            let message = pointer.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let pointer { sqlite3_close_v2(pointer) }
            throw StoreError(code: status, message: "cannot open \(path): \(message)")
        }
        handle = pointer
        self.path = path
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        if path != ":memory:" {
            let mode = try scalarText("PRAGMA journal_mode=WAL")
            guard mode?.lowercased() == "wal" else {
                throw StoreError(code: -1, message: "cannot switch \(path) to WAL (journal_mode is \(mode ?? "?"))")
            }
            // NORMAL is durable across application crashes in WAL mode; only a power loss may drop the last commits.
            try execute("PRAGMA synchronous=NORMAL")
        }
        try execute("PRAGMA foreign_keys=ON")
    }

    deinit {
        sqlite3_close_v2(handle)
    }

    // MARK: - Running SQL

    /// Compiles one statement.
    public func prepare(_ sql: String) throws -> Statement {
        try Statement(connection: self, sql: sql)
    }

    /// Runs one statement with `arguments` bound to its `?` parameters, discarding any rows.
    public func execute(_ sql: String, _ arguments: [SQLValue] = []) throws {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        while try statement.step() {}
    }

    /// Runs several statements separated by semicolons, without parameters (schema scripts).
    public func executeScript(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &error)
        if status != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? lastErrorMessage
            sqlite3_free(error)
            throw StoreError(code: status, message: message, sql: sql)
        }
    }

    /// Runs a query and maps every row.
    public func query<T>(_ sql: String, _ arguments: [SQLValue] = [], row: (Statement) throws -> T) throws -> [T] {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        var rows: [T] = []
        while try statement.step() { rows.append(try row(statement)) }
        return rows
    }

    /// The first column of the first row as an integer, or nil when there is no row or it is NULL.
    public func scalarInteger(_ sql: String, _ arguments: [SQLValue] = []) throws -> Int64? {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return statement.integer(0)
    }

    /// The first column of the first row as text, or nil when there is no row or it is NULL.
    public func scalarText(_ sql: String, _ arguments: [SQLValue] = []) throws -> String? {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return statement.text(0)
    }

    /// The rowid of the last inserted row on this connection.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    // MARK: - Transactions

    /// Runs `body` in a transaction: `BEGIN IMMEDIATE` … `COMMIT`, or `ROLLBACK` when it throws.
    ///
    /// Nested calls become savepoints, so a helper that needs atomicity can call this whether or not its caller
    /// already opened a transaction.
    public func transaction<R>(_ body: () throws -> R) throws -> R {
        let depth = transactionDepth
        let savepoint = "afm_sp\(depth)"
        try executeScript(depth == 0 ? "BEGIN IMMEDIATE" : "SAVEPOINT \(savepoint)")
        transactionDepth += 1
        defer { transactionDepth -= 1 }
        do {
            let result = try body()
            try executeScript(depth == 0 ? "COMMIT" : "RELEASE \(savepoint)")
            return result
        } catch {
            if depth == 0 {
                try? executeScript("ROLLBACK")
            } else {
                try? executeScript("ROLLBACK TO \(savepoint); RELEASE \(savepoint)")
            }
            throw error
        }
    }

    /// Whether a transaction is open on this connection.
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    // MARK: - Checks

    /// `PRAGMA integrity_check`: "ok", or SQLite's list of problems.
    public func integrityCheck() throws -> String {
        try query("PRAGMA integrity_check") { $0.text(0) }.joined(separator: "\n")
    }

    var lastErrorMessage: String { String(cString: sqlite3_errmsg(handle)) }

    var lastErrorCode: Int32 { sqlite3_extended_errcode(handle) }
}

// A connection must be used by one thread at a time; it is opened with SQLITE_OPEN_NOMUTEX.
@available(*, unavailable)
extension Connection: Sendable {}
