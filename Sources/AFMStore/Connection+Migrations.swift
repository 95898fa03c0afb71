// SPDX-License-Identifier: Apache-2.0

extension Connection {
    /// The table that records applied migrations (`version`, `name`, `applied_at_ms`).
    public static let migrationsTable = "afm_schema_migrations"

    /// The highest migration version applied to this database (0 for a new one).
    public func schemaVersion() throws -> Int {
        try executeScript(
            "CREATE TABLE IF NOT EXISTS \(Self.migrationsTable)(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
        )
        return Int(try scalarInteger("SELECT max(version) FROM \(Self.migrationsTable)") ?? 0)
    }

    /// Applies every migration newer than the database, each in its own transaction with its record.
    ///
    /// A database that is already up to date is only read: no write lock is taken.
    ///
    /// A database newer than the newest migration (written by a later program version) is refused rather than
    /// used, because its schema may mean something this program does not know.
    ///
    /// - Returns: the versions applied by this call.
    @discardableResult
    public func migrate(_ migrations: [Migration]) throws -> [Int] {
        let sorted = migrations.sorted { $0.version < $1.version }
        for (offset, migration) in sorted.enumerated() where migration.version != offset + 1 {
            throw StoreError(code: -1, message: "migrations must be numbered 1, 2, 3 …; found \(migration.version)")
        }
        // Read first, without the write lock: an up-to-date database (the usual case) is opened while another
        // process holds a long write transaction (an import), instead of waiting for its lock.
        let tableExists = try scalarInteger(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(Self.migrationsTable)]) != nil
        if tableExists, Int(try scalarInteger("SELECT max(version) FROM \(Self.migrationsTable)") ?? 0) == sorted.count {
            return []
        }
        var applied: [Int] = []
        try transaction {
            let current = try schemaVersion()
            if current > sorted.count {
                throw StoreError(
                    code: -1,
                    message: "\(path) has schema version \(current), newer than this program knows (\(sorted.count))"
                )
            }
            for migration in sorted where migration.version > current {
                try transaction {
                    try executeScript(migration.sql)
                    try execute(
                        "INSERT INTO \(Self.migrationsTable)(version, name, applied_at_ms) VALUES (?, ?, ?)",
                        [.integer(Int64(migration.version)), .text(migration.name), .integer(StoreClock.nowMilliseconds())]
                    )
                }
                applied.append(migration.version)
            }
        }
        return applied
    }
}
