// SPDX-License-Identifier: Apache-2.0

/// One step of a versioned schema: SQL run once, in a transaction, when the database is older than `version`.
public struct Migration: Sendable, Hashable {
    /// Strictly increasing from 1; never renumber a released migration, only append.
    public var version: Int
    /// A short name recorded in the migrations table (`create_history`).
    public var name: String
    /// One or more statements separated by semicolons.
    public var sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}
