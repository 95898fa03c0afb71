// SPDX-License-Identifier: Apache-2.0

/// Why a reload did not take effect; the previous configuration or generation stays active.
public struct ReloadError: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public var backend: String?
    public var activeGeneration: Int?
    public var description: String { backend.map { "\($0): \(reason)" } ?? reason }
}
