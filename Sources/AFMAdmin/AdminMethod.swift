// SPDX-License-Identifier: Apache-2.0

/// The methods of interface `org.afm.Admin`, with the minimum level each needs.
public enum AdminMethod: String, Sendable, Hashable, CaseIterable {
    case getInfo = "GetInfo"
    case getStatus = "GetStatus"
    case watchCounters = "WatchCounters"
    case listBackends = "ListBackends"
    case reload = "Reload"
    case setListener = "SetListener"
    case getPrompt = "GetPrompt"
    case setPrompt = "SetPrompt"
    case getConfig = "GetConfig"
    case setSetting = "SetSetting"

    /// The interface name.
    public static let interface = "org.afm.Admin"

    /// The fully qualified method name, for example `org.afm.Admin.Reload`.
    public var qualifiedName: String { "\(Self.interface).\(rawValue)" }

    /// The lowest level allowed to call this method.
    public var minimumLevel: AdminLevel {
        switch self {
        case .getInfo, .getStatus, .watchCounters, .listBackends, .getConfig, .getPrompt: .user
        case .reload, .setListener: .operator
        case .setPrompt, .setSetting: .admin
        }
    }

    /// Whether the method can send several replies when called with `more: true`.
    public var streams: Bool { self == .watchCounters || self == .reload }

    /// The method for a fully qualified name, if it belongs to `org.afm.Admin`.
    public init?(qualifiedName: String) {
        guard qualifiedName.hasPrefix(Self.interface + ".") else { return nil }
        self.init(rawValue: String(qualifiedName.dropFirst(Self.interface.count + 1)))
    }
}
