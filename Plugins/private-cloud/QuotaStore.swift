// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import CPrivateCloudSupport
import Foundation
import Synchronization

/// The daily request and token counts of every upstream, per UTC day, in SQLite (`<state_dir>/quota.sqlite3`,
/// WAL mode), so a restart or a reload does not reset them.
///
/// ```sql
/// schema_migrations(version INTEGER PRIMARY KEY, applied_at TEXT)      -- one row per applied migration
/// daily_usage(day TEXT PRIMARY KEY, requests INTEGER, tokens INTEGER)  -- migration 1; no longer written
/// upstream_daily_usage(upstream TEXT, day TEXT, requests INTEGER, tokens INTEGER,
///                      PRIMARY KEY (upstream, day))                     -- migration 2; day = "2026-11-30" (UTC)
/// ```
///
/// An upstream is identified by its base URL as configured (trailing slashes removed), so reordering `Upstreams`
/// or changing an upstream's model or protocol keeps its counts, and editing its URL starts new ones. Counts that
/// migration 1 recorded for the whole backend (before counting per upstream) are added to every upstream's counts
/// for their day: an upgrade in the middle of a day never hands out fresh quota.
///
/// Every check-and-charge is one `BEGIN IMMEDIATE` transaction (the connection stays locked for all of it) and
/// every count an `UPSERT` increment, so two instances on the same database (an old generation draining during a
/// reload, and its successor) count together. Without a `state_dir` the database is in memory (counts then live
/// as long as the instance).
final class QuotaStore: Sendable {
    /// One upstream's daily limits and the key its counts are stored under.
    struct Account: Sendable, Hashable {
        /// The upstream's base URL.
        var upstream: String
        /// Requests per UTC day (nil: unlimited).
        var requestLimit: Int?
        /// Input + output tokens per UTC day (nil: unlimited).
        var tokenLimit: Int?

        init(_ upstream: Settings.UpstreamConfig) {
            self.upstream = upstream.baseURL
            requestLimit = upstream.dailyRequestQuota
            tokenLimit = upstream.dailyTokenQuota
        }

        /// Why this account can take no request with `usage` counted, or nil when it can.
        func exhaustion(_ usage: Usage) -> String? {
            if let requestLimit, usage.requests >= requestLimit {
                return "\(upstream): \(usage.requests) of \(requestLimit) requests"
            }
            if let tokenLimit, usage.tokens >= tokenLimit {
                return "\(upstream): \(usage.tokens) of \(tokenLimit) tokens"
            }
            return nil
        }
    }

    /// One request counted against one upstream on one UTC day; a refund or the request's tokens go to the same
    /// row even when midnight passes while it runs.
    struct Charge: Sendable, Hashable {
        var upstream: String
        var day: String
    }

    /// Requests and tokens.
    struct Usage: Sendable, Hashable {
        var requests = 0
        var tokens = 0

        /// The counts as read from a row: the database is a file anyone with access can edit or damage, so a
        /// negative count reads as 0.
        init(requests: Int = 0, tokens: Int = 0) {
            self.requests = max(0, requests)
            self.tokens = max(0, tokens)
        }

        /// Both counts added, saturating at `Int.max` (counts near `Int64.max` from the file must not trap).
        static func + (lhs: Usage, rhs: Usage) -> Usage {
            Usage(requests: saturatingSum(lhs.requests, rhs.requests), tokens: saturatingSum(lhs.tokens, rhs.tokens))
        }
    }

    /// `a + b`, or `Int.max` / `Int.min` where that overflows.
    static func saturatingSum(_ a: Int, _ b: Int) -> Int {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b > 0 ? .max : .min) : sum
    }

    /// The outcome of `reserve`.
    enum Reservation: Sendable {
        /// One request was counted against this upstream.
        case charged(Charge)
        /// Every account offered is used up; one reason per account (`<url>: 2 of 2 requests`).
        case usedUp([String])
    }

    /// Today's counts of some upstreams.
    struct Snapshot: Sendable {
        /// Per upstream, in the order asked, including the backend-wide counts of migration 1 (what the limits
        /// are checked against).
        var usage: [Usage]
        /// Today's total over those upstreams (the backend-wide counts of migration 1 added once).
        var total: Usage
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
        """,
        """
        CREATE TABLE upstream_daily_usage (
            upstream TEXT NOT NULL,
            day TEXT NOT NULL,
            requests INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (upstream, day)
        )
        """,
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
            try locked { sql throws(BackendError) in
                try sql.execute("PRAGMA journal_mode=WAL")
                try sql.execute("PRAGMA synchronous=NORMAL")
                try Self.migrate(sql)
            }
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

    /// Counts one request against the first account, in the order given, that is not used up today.
    ///
    /// - Throws: `AFM_ERR_INTERNAL` when the database fails.
    func reserve(_ accounts: [Account], now: Date = Date()) throws(BackendError) -> Reservation {
        let day = Self.day(now)
        return try transaction { sql throws(BackendError) in
            let legacy = try Self.legacyUsage(sql, day: day)
            var reasons: [String] = []
            for account in accounts {
                let usage = try Self.usage(sql, upstream: account.upstream, day: day) + legacy
                if let reason = account.exhaustion(usage) {
                    reasons.append(reason)
                    continue
                }
                try Self.add(sql, upstream: account.upstream, day: day, requests: 1, tokens: 0)
                return .charged(Charge(upstream: account.upstream, day: day))
            }
            return .usedUp(reasons)
        }
    }

    /// Takes back a request that no upstream served (it failed over before its first event).
    func refund(_ charge: Charge) throws(BackendError) {
        try transaction { sql throws(BackendError) in
            try sql.run(
                "UPDATE upstream_daily_usage SET requests = MAX(0, requests - 1) WHERE upstream = ?1 AND day = ?2",
                bind: [charge.upstream, charge.day])
        }
    }

    /// Adds the tokens a request used to the upstream and day it was charged to.
    func chargeTokens(_ tokens: Int, to charge: Charge) throws(BackendError) {
        guard tokens > 0 else { return }
        try transaction { sql throws(BackendError) in
            try Self.add(sql, upstream: charge.upstream, day: charge.day, requests: 0, tokens: tokens)
        }
    }

    /// Today's counts of `upstreams` (zeros when the database fails: describe must not).
    func snapshot(_ upstreams: [String], now: Date = Date()) -> Snapshot {
        let day = Self.day(now)
        let counted = try? locked { sql throws(BackendError) -> ([Usage], Usage) in
            let legacy = try Self.legacyUsage(sql, day: day)
            var total = legacy
            var usage: [Usage] = []
            for upstream in upstreams {
                let own = try Self.usage(sql, upstream: upstream, day: day)
                total = total + own
                usage.append(own + legacy)
            }
            return (usage, total)
        }
        return Snapshot(
            usage: counted?.0 ?? upstreams.map { _ in Usage() }, total: counted?.1 ?? Usage(),
            resetsAt: Self.resetTime(now))
    }

    /// The `quota_exceeded` message for accounts that are all used up.
    static func exceededMessage(_ reasons: [String], resetsAt: String) -> String {
        let whose = reasons.count == 1 ? "the private-cloud upstream's" : "every private-cloud upstream's"
        return "\(whose) daily quota is used up (\(reasons.joined(separator: "; "))); it resets at \(resetsAt)"
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

    private static func migrate(_ sql: SQL) throws(BackendError) {
        try sql.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        try sql.execute("BEGIN IMMEDIATE")
        do throws(BackendError) {
            let applied = try sql.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", bind: []).first ?? 0
            guard applied <= migrations.count else {
                throw BackendError.incompatible(
                    "the quota database has schema version \(applied); this backend knows up to \(migrations.count)")
            }
            for version in (applied + 1)..<(migrations.count + 1) {
                try sql.execute(migrations[version - 1])
                try sql.run(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                    bind: ["\(version)", ISO8601DateFormatter().string(from: Date())])
            }
            try sql.execute("COMMIT")
        } catch {
            try? sql.execute("ROLLBACK")
            throw error
        }
    }

    private static func usage(_ sql: SQL, upstream: String, day: String) throws(BackendError) -> Usage {
        let row = try sql.query(
            "SELECT requests, tokens FROM upstream_daily_usage WHERE upstream = ? AND day = ?", bind: [upstream, day])
        return row.count == 2 ? Usage(requests: row[0], tokens: row[1]) : Usage()
    }

    /// What migration 1 counted for the whole backend on `day` (before counting per upstream).
    private static func legacyUsage(_ sql: SQL, day: String) throws(BackendError) -> Usage {
        let row = try sql.query("SELECT requests, tokens FROM daily_usage WHERE day = ?", bind: [day])
        return row.count == 2 ? Usage(requests: row[0], tokens: row[1]) : Usage()
    }

    private static func add(_ sql: SQL, upstream: String, day: String, requests: Int, tokens: Int) throws(BackendError) {
        try sql.run(
            """
            INSERT INTO upstream_daily_usage (upstream, day, requests, tokens) VALUES (?1, ?2, ?3, ?4)
            ON CONFLICT(upstream, day) DO UPDATE SET requests = requests + ?3, tokens = tokens + ?4
            """, bind: [upstream, day, "\(requests)", "\(tokens)"])
    }

    /// Runs `body` with the connection locked for all of it (SQLite transactions belong to the connection, so two
    /// threads must not interleave statements of theirs on it).
    private func locked<T: Sendable>(_ body: (SQL) throws(BackendError) -> T) throws(BackendError) -> T {
        let result: Result<T, BackendError> = database.withLock { handle in
            guard let handle else { return .failure(.internal("quota database: closed")) }
            do throws(BackendError) {
                return .success(try body(SQL(handle: handle)))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// `body` in one `BEGIN IMMEDIATE` transaction, rolled back when it throws.
    private func transaction<T: Sendable>(_ body: (SQL) throws(BackendError) -> T) throws(BackendError) -> T {
        try locked { sql throws(BackendError) in
            try sql.execute("BEGIN IMMEDIATE")
            do throws(BackendError) {
                let value = try body(sql)
                try sql.execute("COMMIT")
                return value
            } catch {
                try? sql.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// The open connection, used only while its lock is held.
    private struct SQL {
        let handle: OpaquePointer

        func execute(_ sql: String) throws(BackendError) {
            var message: UnsafeMutablePointer<CChar>?
            guard sqlite3_exec(handle, sql, nil, nil, &message) == SQLITE_OK else {
                defer { sqlite3_free(message) }
                let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
                throw .internal("quota database: \(text)")
            }
        }

        /// Runs a statement that returns nothing.
        func run(_ sql: String, bind values: [String]) throws(BackendError) {
            _ = try query(sql, bind: values)
        }

        /// Runs a statement and returns the integer columns of its first row (empty without rows).
        func query(_ sql: String, bind values: [String]) throws(BackendError) -> [Int] {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
                throw .internal("quota database: \(String(cString: sqlite3_errmsg(handle)))")
            }
            defer { sqlite3_finalize(statement) }
            for (index, value) in values.enumerated() {
                _ = afm_pc_sqlite_bind_text(statement, Int32(index + 1), value)
            }
            let step = sqlite3_step(statement)
            guard step == SQLITE_ROW || step == SQLITE_DONE else {
                throw .internal("quota database: \(String(cString: sqlite3_errmsg(handle)))")
            }
            guard step == SQLITE_ROW else { return [] }
            return (0..<sqlite3_column_count(statement)).map { Int(sqlite3_column_int64(statement, $0)) }
        }
    }
}
