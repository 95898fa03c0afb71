// SPDX-License-Identifier: Apache-2.0
import AFMStore
import Foundation
import Testing

@Suite struct ConnectionTests {
    private func temporaryPath() -> String {
        let directory = NSTemporaryDirectory() + "afm-store-\(getpid())-\(UUID().uuidString.prefix(8))"
        try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)  // A test needs it.
        return directory + "/test.sqlite"
    }

    @Test func opensInWALModeWithForeignKeys() throws {
        let db = try Connection(path: temporaryPath())
        #expect(try db.scalarText("PRAGMA journal_mode") == "wal")
        #expect(try db.scalarInteger("PRAGMA foreign_keys") == 1)
    }

    @Test func migrationsApplyOnceInOrderAndAreRecorded() throws {
        let path = temporaryPath()
        let first = [Migration(version: 1, name: "create", sql: "CREATE TABLE t(x INTEGER)")]
        let both = first + [Migration(version: 2, name: "add", sql: "ALTER TABLE t ADD COLUMN y TEXT; CREATE INDEX t_y ON t(y)")]
        do {
            let db = try Connection(path: path)
            #expect(try db.migrate(first) == [1])
            #expect(try db.migrate(first) == [])
        }
        let db = try Connection(path: path)
        #expect(try db.migrate(both) == [2])
        #expect(try db.schemaVersion() == 2)
        try db.execute("INSERT INTO t(x, y) VALUES (?, ?)", [1, "one"])
        #expect(try db.query("SELECT name FROM \(Connection.migrationsTable) ORDER BY version") { $0.text(0) } == ["create", "add"])
        // A newer database than the program knows is refused.
        #expect(throws: StoreError.self) { try Connection(path: path).migrate(first) }
    }

    @Test func failedMigrationLeavesNoTrace() throws {
        let db = try Connection(path: temporaryPath())
        let broken = [Migration(version: 1, name: "broken", sql: "CREATE TABLE a(x); CREATE TABLE a(x)")]
        #expect(throws: StoreError.self) { try db.migrate(broken) }
        #expect(try db.schemaVersion() == 0)
        #expect(try db.scalarInteger("SELECT count(*) FROM sqlite_master WHERE name = 'a'") == 0)
    }

    @Test func transactionsRollBackAndNest() throws {
        let db = try Connection(path: temporaryPath())
        try db.execute("CREATE TABLE t(x INTEGER UNIQUE)")
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try db.transaction {
                try db.execute("INSERT INTO t VALUES (1)")
                throw Stop()
            }
        }
        try db.transaction {
            try db.execute("INSERT INTO t VALUES (2)")
            _ = try? db.transaction {
                try db.execute("INSERT INTO t VALUES (3)")
                try db.execute("INSERT INTO t VALUES (3)")  // fails: only the savepoint rolls back
            }
        }
        #expect(try db.query("SELECT x FROM t ORDER BY x") { $0.integer(0) } == [2])
        #expect(!db.isInTransaction)
    }

    @Test func bindsAndReadsEveryType() throws {
        let db = try Connection(path: ":memory:")
        try db.execute("CREATE TABLE v(i, r, t, b, n)")
        try db.execute("INSERT INTO v VALUES (?, ?, ?, ?, ?)", [.integer(-7), .real(2.5), .text("héllo"), .blob([0, 1, 255]), .null])
        let row = try db.query("SELECT i, r, t, b, n FROM v") { ($0.integer(0), $0.real(1), $0.text(2), $0.blob(3), $0.isNull(4)) }[0]
        #expect(row.0 == -7 && row.1 == 2.5 && row.2 == "héllo" && row.3 == [0, 1, 255] && row.4)
    }

    @Test func errorsCarryCodeAndSQL() throws {
        let db = try Connection(path: ":memory:")
        try db.execute("CREATE TABLE u(x UNIQUE)")
        try db.execute("INSERT INTO u VALUES (1)")
        let error = try #require(throws: StoreError.self) { try db.execute("INSERT INTO u VALUES (1)") }
        #expect(error.isConstraint)
        #expect(error.sql?.contains("INSERT") == true)
    }
}
