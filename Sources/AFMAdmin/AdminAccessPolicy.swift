// SPDX-License-Identifier: Apache-2.0
import AFMSystem

/// Decides a connection's ``AdminLevel`` from its peer credentials.
///
/// - `admin`: uid 0 or the daemon's own uid (``adminUserIDs``).
/// - `operator`: the peer's primary group or one of its supplementary groups (from `SO_PEERGROUPS`) is in
///   ``operatorGroupIDs``. The groups the process holds count, never the group database: a process that dropped
///   a group (`setpriv --clear-groups`, a sandbox) does not get it back. Without `SO_PEERGROUPS` (Linux < 4.13)
///   only the primary group counts.
/// - `user`: anyone else who can connect (the socket's file mode decides who can).
public struct AdminAccessPolicy: Sendable, Hashable {
    /// User ids granted `admin`.
    public var adminUserIDs: Set<UInt32>
    /// Group ids granted `operator`.
    public var operatorGroupIDs: Set<UInt32>
    /// Names in `Admin.OperatorGroups` that matched no group (worth a warning in the log).
    public var unknownGroupNames: [String]

    /// Creates a policy from ids.
    public init(adminUserIDs: Set<UInt32>, operatorGroupIDs: Set<UInt32>) {
        self.adminUserIDs = adminUserIDs
        self.operatorGroupIDs = operatorGroupIDs
        self.unknownGroupNames = []
    }

    /// The daemon's policy: admin = root and this process's effective uid; operator = members of the groups
    /// named in `operatorGroups` (names or numeric ids; unknown names are skipped and listed).
    public init(operatorGroups: [String]) {
        var ids: Set<UInt32> = []
        var unknown: [String] = []
        for name in operatorGroups {
            if let id = UserDatabase.groupID(named: name) { ids.insert(id) } else { unknown.append(name) }
        }
        self.adminUserIDs = [0, UserDatabase.effectiveUserID]
        self.operatorGroupIDs = ids
        self.unknownGroupNames = unknown
    }

    /// The level for a peer.
    ///
    /// - Parameter groups: the peer's supplementary groups (`SO_PEERGROUPS`); `nil` (unknown) counts as none.
    public func level(for credentials: PeerCredentials, groups: [UInt32]?) -> AdminLevel {
        if adminUserIDs.contains(credentials.uid) { return .admin }
        if operatorGroupIDs.isEmpty { return .user }
        if operatorGroupIDs.contains(credentials.gid) { return .operator }
        return (groups ?? []).contains(where: operatorGroupIDs.contains) ? .operator : .user
    }
}
