// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI
import CPrivateCloudSupport
import Foundation
import Synchronization

/// The daily request and token counts, per UTC day, in SQLite (`<state_dir>/quota.sqlite3`, WAL mode), so a
/// restart or a reload does not reset them.
///
/// ```sql
/// schema_migrations(version INTEGER PRIMARY KEY, applied_at TEXT)      -- one row per applied migration
/// daily_usage(day TEXT PRIMARY KEY, requests INTEGER, tokens INTEGER)  -- migration 1; day = "2026-11-30" (UTC)
/// ```
///
/// Every check-and-charge is one `BEGIN IMMEDIATE` transaction and every count an `UPSERT` increment, so two
/// instances on the same database (an old generation draining during a reload, and its successor) count together.
/// Without a `state_dir` the database is in memory (counts then live as long as the instance).
final class QuotaStore: Sendable {
    /// The counts of one UTC day.
    struct Snapshot: Sendable, Hashable {
        var requests: Int
        var tokens: Int
        /// The next UTC midnight, ISO 8601 (`2026-12-01T00:00:00Z`).
        var resetsAt: String
    }

    /// The migrations, in order; version n is `migrations[n - 1]`. Append only.
    static let migrations = [
        """
        CREATE TABLE daily_usage (
            day TEXT PRIMARY KEY,
            requests INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0
        )
        """
    ]

    /// The database file name inside the state directory.
    static let fileName = "quota.sqlite3"

    private let database: Mutex<OpaquePointer?>
    /// Where the database is, for messages.
    let path: String

    /// Opens (creating if needed) the database and applies pending migrations.
    ///
    /// - Throws: `AFM_ERR_MODEL_UNAVAILABLE` naming the file when it cannot be created, opened or migrated.
    init(directory: String?) throws(BackendError) {
        if let directory {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw .modelUnavailable("the state directory \(directory) cannot be created: \(error.localizedDescription)")
            }
            path = directory + "/" + Self.fileName
        } else {
            path = ":memory:"
        }
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            throw .modelUnavailable("the quota database \(path) cannot be opened: \(message)")
        }
        sqlite3_busy_timeout(handle, 5000)
        database = Mutex(handle)
        do {
            try execute("PRAGMA journal_mode=WAL")
            try execute("PRAGMA synchronous=NORMAL")
            try migrate()
        } catch {
            close()
            throw .modelUnavailable("the quota database \(path) cannot be prepared: \(error.message)")
        }
    }

    deinit { close() }

    /// Closes the database. Idempotent.
    func close() {
        database.withLock { handle in
            if let open = handle { sqlite3_close_v2(open) }
            handle = nil
        }
    }

    // MARK: - Quota

    /// Checks both limits for today and, when neither is used up, counts one request.
    ///
    /// - Throws: `AFM_ERR_QUOTA_EXCEEDED` with the limit and the reset time; `AFM_ERR_INTERNAL` when the
    ///   database fails.
    func chargeRequest(requestLimit: Int?, tokenLimit: Int?, now: Date = Date()) throws(BackendError) {
        let day = Self.day(now)
        let resetsAt = Self.resetTime(now)
        try transaction { () throws(BackendError) in
            let (requests, tokens) = try counts(day: day)
            if let requestLimit, requests >= requestLimit {
                throw BackendError(
                    AFM_ERR_QUOTA_EXCEEDED,
                    "the private cloud's daily request quota (\(requestLimit) requests) is used up; it resets at "
                        + resetsAt)
            }
            if let tokenLimit, tokens >= tokenLimit {
                throw BackendError(
                    AFM_ERR_QUOTA_EXCEEDED,
                    "the private cloud's daily token quota (\(tokenLimit) tokens) is used up; it resets at \(resetsAt)")
            }
            try add(day: day, requests: 1, tokens: 0)
        }
    }

    /// Adds the tokens a finished request used to today's count.
    func chargeTokens(_ tokens: Int, now: Date = Date()) throws(BackendError) {
        guard tokens > 0 else { return }
        try transaction { () throws(BackendError) in try add(day: Self.day(now), requests: 0, tokens: tokens) }
    }

    /// Today's counts.
    func snapshot(now: Date = Date()) -> Snapshot {
        let (requests, tokens) = (try? counts(day: Self.day(now))) ?? (0, 0)
        return Snapshot(requests: requests, tokens: tokens, resetsAt: Self.resetTime(now))
    }

    // MARK: - Days

    /// The UTC day of `date`: `yyyy-MM-dd`.
    static func day(_ date: Date) -> String {
        let parts = utc.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 1970, parts.month ?? 1, parts.day ?? 1)
    }

    /// The UTC midnight after `date`, ISO 8601.
    static func resetTime(_ date: Date) -> String {
        let start = utc.startOfDay(for: date)
        let next = utc.date(byAdding: .day, value: 1, to: start) ?? date.addingTimeInterval(86_400)
        let parts = utc.dateComponents([.year, .month, .day], from: next)
        return String(format: "%04d-%02d-%02dT00:00:00Z", parts.year ?? 1970, parts.month ?? 1, parts.day ?? 1)
    }

    private static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? TimeZone(secondsFromGMT: 0)!  // UTC always exists
        return calendar
    }()

    // MARK: - SQL

    private func migrate() throws(BackendError) {
        try execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        try transaction { () throws(BackendError) in
            let applied = try query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", bind: []).first ?? 0
            guard applied <= Self.migrations.count else {
                throw .incompatible(
                    "the quota database has schema version \(applied); this backend knows up to "
                        + "\(Self.migrations.count)")
            }
            for version in (applied + 1)..<(Self.migrations.count + 1) {
                try execute(Self.migrations[version - 1])
                try run(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                    bind: ["\(version)", ISO8601DateFormatter().string(from: Date())])
            }
        }
    }

    private func counts(day: String) throws(BackendError) -> (Int, Int) {
        let row = try query("SELECT requests, tokens FROM daily_usage WHERE day = ?", bind: [day])
        return row.count == 2 ? (row[0], row[1]) : (0, 0)
    }

    private func add(day: String, requests: Int, tokens: Int) throws(BackendError) {
        try run(
            """
            INSERT INTO daily_usage (day, requests, tokens) VALUES (?1, ?2, ?3)
            ON CONFLICT(day) DO UPDATE SET requests = requests + ?2, tokens = tokens + ?3
            """, bind: [day, "\(requests)", "\(tokens)"])
    }

    private func transaction(_ body: () throws(BackendError) -> Void) throws(BackendError) {
        try execute("BEGIN IMMEDIATE")
        do {
            try body()
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    private func execute(_ sql: String) throws(BackendError) {
        let failure: String? = database.withLock { handle in
            guard let handle else { return "the database is closed" }
            var message: UnsafeMutablePointer<CChar>?
            guard sqlite3_exec(handle, sql, nil, nil, &message) == SQLITE_OK else {
                defer { sqlite3_free(message) }
                return message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            }
            return nil
        }
        if let failure { throw .internal("quota database: \(failure)") }
    }

    /// Runs a statement that returns nothing.
    private func run(_ sql: String, bind values: [String]) throws(BackendError) {
        _ = try query(sql, bind: values)
    }

    /// Runs a statement and returns the integer columns of its first row (empty without rows).
    private func query(_ sql: String, bind values: [String]) throws(BackendError) -> [Int] {
        let result: Result<[Int], BackendError> = database.withLock { handle in
            guard let handle else { return .failure(.internal("quota database: closed")) }
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
                return .failure(.internal("quota database: \(String(cString: sqlite3_errmsg(handle)))"))
            }
            defer { sqlite3_finalize(statement) }
            for (index, value) in values.enumerated() {
                _ = afm_pc_sqlite_bind_text(statement, Int32(index + 1), value)
            }
            let step = sqlite3_step(statement)
            guard step == SQLITE_ROW || step == SQLITE_DONE else {
                return .failure(.internal("quota database: \(String(cString: sqlite3_errmsg(handle)))"))
            }
            guard step == SQLITE_ROW else { return .success([]) }
            return .success((0..<sqlite3_column_count(statement)).map { Int(sqlite3_column_int64(statement, $0)) })
        }
        return try result.get()
    }
}
