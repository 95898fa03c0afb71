// SPDX-License-Identifier: Apache-2.0

/// What a peer of the admin socket may do (HAProxy's levels): each method has a minimum level.
///
/// - `user`: read status, counters, backends, config and the prompt.
/// - `operator`: also reload and start/stop the listener.
/// - `admin`: also change settings and the prompt.
public enum AdminLevel: Int, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    /// Anyone who can connect.
    case user = 0
    /// A member of one of `Admin.OperatorGroups`.
    case `operator` = 1
    /// uid 0 or the daemon's own uid.
    case admin = 2

    public static func < (lhs: AdminLevel, rhs: AdminLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .user: "user"
        case .operator: "operator"
        case .admin: "admin"
        }
    }
}
