// SPDX-License-Identifier: Apache-2.0
private import CSQLite

/// A compiled SQL statement of one ``Connection``: bind, step, read columns.
///
/// Finalized in `deinit`. Text and blobs are bound with `SQLITE_TRANSIENT`, so SQLite copies them.
public final class Statement {
    private let pointer: OpaquePointer
    private let connection: Connection
    private let sql: String

    init(connection: Connection, sql: String) throws {
        var pointer: OpaquePointer?
        let status = sqlite3_prepare_v2(connection.handle, sql, -1, &pointer, nil)
        guard status == SQLITE_OK, let pointer else {
            throw StoreError(code: status, message: connection.lastErrorMessage, sql: sql)
        }
        self.pointer = pointer
        self.connection = connection
        self.sql = sql
    }

    deinit {
        sqlite3_finalize(pointer)
    }

    /// Binds `values` to parameters 1…n.
    public func bind(_ values: [SQLValue]) throws {
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    /// Binds one value to the parameter at `index` (1-based).
    public func bind(_ value: SQLValue, at index: Int32) throws {
        let status: Int32
        switch value {
        case .null: status = sqlite3_bind_null(pointer, index)
        case .integer(let integer): status = sqlite3_bind_int64(pointer, index, integer)
        case .real(let real): status = sqlite3_bind_double(pointer, index, real)
        case .text(let text): status = sqlite3_bind_text(pointer, index, text, -1, afm_sqlite_transient())
        case .blob(let bytes):
            status = bytes.withUnsafeBytes { raw in
                sqlite3_bind_blob64(pointer, index, raw.baseAddress, sqlite3_uint64(raw.count), afm_sqlite_transient())
            }
        }
        guard status == SQLITE_OK else { throw StoreError(code: status, message: connection.lastErrorMessage, sql: sql) }
    }

    /// Advances to the next row: true when a row is available, false when the statement is done.
    public func step() throws -> Bool {
        switch sqlite3_step(pointer) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw StoreError(code: connection.lastErrorCode, message: connection.lastErrorMessage, sql: sql)
        }
    }

    /// Resets the statement so it can run again, and clears its bindings.
    public func reset() {
        sqlite3_reset(pointer)
        sqlite3_clear_bindings(pointer)
    }

    // MARK: - Columns (0-based)

    public func isNull(_ column: Int32) -> Bool { sqlite3_column_type(pointer, column) == SQLITE_NULL }

    public func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(pointer, column) }

    public func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(pointer, column)) }

    public func real(_ column: Int32) -> Double { sqlite3_column_double(pointer, column) }

    /// The column as UTF-8 text ("" for NULL).
    public func text(_ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(pointer, column) else { return "" }
        let count = Int(sqlite3_column_bytes(pointer, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// The column as text, or nil for NULL.
    public func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }

    /// The column as bytes ([] for NULL).
    public func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(pointer, column))
        guard count > 0, let bytes = sqlite3_column_blob(pointer, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}

// A statement belongs to its connection's thread.
@available(*, unavailable)
extension Statement: Sendable {}
