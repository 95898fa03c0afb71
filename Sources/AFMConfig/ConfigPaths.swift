// SPDX-License-Identifier: Apache-2.0
import AFMSystem

/// Where configuration, state and runtime files live, for one of three modes.
///
/// | mode | main file candidates | drop-in dirs (highest first) | state | runtime |
/// |---|---|---|---|---|
/// | system | `/etc/afm/afmd.conf`, `/usr/lib/afm/afmd.conf` | `/etc/afm/afmd.conf.d`, `/usr/lib/afm/afmd.conf.d` | `/var/lib/afm` (or `$STATE_DIRECTORY`) | `/run/afm` (or `$RUNTIME_DIRECTORY`) |
/// | user | `$XDG_CONFIG_HOME/afm/afmd.conf` | `$XDG_CONFIG_HOME/afm/afmd.conf.d` | `$XDG_STATE_HOME/afm` | `$XDG_RUNTIME_DIR/afm` (or `/tmp/afm-UID`) |
///
/// In the user layout `XDG_CONFIG_HOME` and `XDG_STATE_HOME` default to `$HOME/.config` and `$HOME/.local/state`;
/// without `HOME` the home is the user's entry in the user database, and only a uid without one falls back to
/// `/tmp/afm-home-UID`, used after ``prepareHomeDirectory(owner:)`` made or verified it private.
/// | `--config-root DIR` | `DIR/etc/afm/afmd.conf`, `DIR/usr/lib/afm/afmd.conf`, `DIR/afmd.conf` | `DIR/etc/afm/afmd.conf.d`, `DIR/usr/lib/afm/afmd.conf.d` | `DIR/var/lib/afm` | `DIR/run/afm` |
///
/// `/tmp/afm-UID` (no `XDG_RUNTIME_DIR`) sits in a world-writable directory, so it is used only after
/// ``prepareRuntimeDirectory()`` made or verified it private (owner = effective uid, mode `0700`, not a symlink);
/// so is any runtime directory whose parent every user may write to (`XDG_RUNTIME_DIR=/tmp`).
///
/// `DIR/afmd.conf` is the last candidate under `--config-root` so trees written before layering still work.
/// `--config FILE` replaces the candidates with exactly that file (which must exist); drop-ins still apply.
/// The control layer is `<state>/control.json`.
public struct ConfigPaths: Sendable, Hashable {
    /// Which layout these paths follow.
    public enum Mode: Sendable, Hashable {
        /// A packaged service (root, or started by systemd).
        case system
        /// A user running from a checkout (XDG directories).
        case user
        /// Everything under one directory (`--config-root`, tests).
        case relocated(root: String)
    }

    /// The layout.
    public var mode: Mode
    /// Main-file candidates; the first that exists is read, the others are ignored.
    public var mainFileCandidates: [String]
    /// Directories holding `*.conf` drop-ins, highest priority first (a name here shadows the same name later).
    public var dropInDirectories: [String]
    /// The daemon's persistent state (the control layer, backend state).
    public var stateDirectory: String
    /// Sockets and per-boot files (the admin socket, backend copies).
    public var runtimeDirectory: String
    /// `--config FILE`: read exactly this main file instead of the candidates.
    public var explicitMainFile: String?
    /// Whether ``runtimeDirectory`` is the `/tmp/afm-UID` fallback, which another user could have created first.
    public var runtimeDirectoryIsShared: Bool
    /// The `/tmp/afm-HOME-UID` fallback home when config or state paths lie under it (no `HOME`, no user-database
    /// entry): another user could have created it first, with a config of theirs in it.
    public var sharedHomeDirectory: String?

    /// Creates paths explicitly.
    public init(
        mode: Mode, mainFileCandidates: [String], dropInDirectories: [String], stateDirectory: String,
        runtimeDirectory: String, explicitMainFile: String? = nil, runtimeDirectoryIsShared: Bool = false,
        sharedHomeDirectory: String? = nil
    ) {
        self.mode = mode
        self.mainFileCandidates = mainFileCandidates
        self.dropInDirectories = dropInDirectories
        self.stateDirectory = stateDirectory
        self.runtimeDirectory = runtimeDirectory
        self.explicitMainFile = explicitMainFile
        self.runtimeDirectoryIsShared = runtimeDirectoryIsShared
        self.sharedHomeDirectory = sharedHomeDirectory
    }

    /// Makes the `/tmp/afm-UID` fallback, or a runtime directory in a world-writable directory, safe to use before
    /// anything is put there or connected to: creates it with mode `0700`, or refuses one that is not a real
    /// directory owned by this effective user with mode `0700`. Other runtime directories (systemd's,
    /// `XDG_RUNTIME_DIR`'s, `--config-root`'s) are not shared and pass.
    ///
    /// - Throws: ``PrivateDirectoryError`` naming the path, its owner and its mode.
    public func prepareRuntimeDirectory() throws(PrivateDirectoryError) {
        guard runtimeDirectoryMustBePrivate else { return }
        try PrivateDirectory.prepare(runtimeDirectory, owner: UserDatabase.effectiveUserID)
    }

    /// Whether ``runtimeDirectory`` must pass ``PrivateDirectory`` before each use: the `/tmp/afm-UID` fallback, or
    /// any directory whose parent others may write to (another user can create or, after a tmp cleaner removed
    /// it, re-create the name). Looks at the parent (`stat`) each time it is asked.
    public var runtimeDirectoryMustBePrivate: Bool {
        runtimeDirectoryIsShared || PrivateDirectory.parentIsWritableByOthers(runtimeDirectory)
    }

    /// Makes the fallback home (``sharedHomeDirectory``) safe before a config is read from or state written under
    /// it, like ``prepareRuntimeDirectory()``; a home from `HOME` or the user database passes unchecked.
    ///
    /// - Parameter owner: the user it must belong to (the effective uid).
    /// - Throws: ``PrivateDirectoryError`` naming the path, its owner and its mode.
    public func prepareHomeDirectory(owner: UInt32 = UserDatabase.effectiveUserID) throws(PrivateDirectoryError) {
        guard let sharedHomeDirectory else { return }
        do {
            try PrivateDirectory.prepare(sharedHomeDirectory, owner: owner)
        } catch {
            var error = error
            error.remedy = "remove it, or set HOME (or XDG_CONFIG_HOME and XDG_STATE_HOME)"
            throw error
        }
    }

    /// The control-layer file: the versioned settings ``ServerSettings`` written by the admin socket.
    public var controlFile: String { stateDirectory + "/control.json" }

    /// The default admin socket path: `<runtime>/admin.sock`.
    public var defaultAdminSocket: String { runtimeDirectory + "/admin.sock" }

    /// The packaged-service layout; `$STATE_DIRECTORY`/`$RUNTIME_DIRECTORY` (set by systemd) win when present.
    public static func system(environment: [String: String] = [:]) -> ConfigPaths {
        ConfigPaths(
            mode: .system,
            mainFileCandidates: ["/etc/afm/afmd.conf", "/usr/lib/afm/afmd.conf"],
            dropInDirectories: ["/etc/afm/afmd.conf.d", "/usr/lib/afm/afmd.conf.d"],
            stateDirectory: firstPath(environment["STATE_DIRECTORY"]) ?? "/var/lib/afm",
            runtimeDirectory: firstPath(environment["RUNTIME_DIRECTORY"]) ?? "/run/afm")
    }

    /// The XDG layout of a user running from a checkout.
    /// Without `HOME`, the home is `uid`'s entry in the user database; without one either, `/tmp/afm-home-UID`,
    /// recorded in ``sharedHomeDirectory`` when a path lies under it.
    public static func user(environment: [String: String], uid: UInt32 = UserDatabase.currentUserID) -> ConfigPaths {
        let configHome = nonEmpty(environment["XDG_CONFIG_HOME"])
        let stateHome = nonEmpty(environment["XDG_STATE_HOME"])
        var sharedHome: String?
        var home = nonEmpty(environment["HOME"]) ?? UserDatabase.homeDirectory(of: uid) ?? ""
        if home.isEmpty {
            home = "/tmp/afm-home-\(uid)"
            if configHome == nil || stateHome == nil { sharedHome = home }
        }
        let config = (configHome ?? home + "/.config") + "/afm"
        let state = (stateHome ?? home + "/.local/state") + "/afm"
        let xdgRuntime = nonEmpty(environment["XDG_RUNTIME_DIR"]).map { $0 + "/afm" }
        return ConfigPaths(
            mode: .user, mainFileCandidates: [config + "/afmd.conf"], dropInDirectories: [config + "/afmd.conf.d"],
            stateDirectory: state, runtimeDirectory: xdgRuntime ?? sharedRuntimeDirectory(uid: uid),
            runtimeDirectoryIsShared: xdgRuntime == nil, sharedHomeDirectory: sharedHome)
    }

    /// Everything under `root` (`--config-root`), like `systemd-analyze --root`.
    public static func relocated(under root: String) -> ConfigPaths {
        let root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        return ConfigPaths(
            mode: .relocated(root: root),
            mainFileCandidates: [root + "/etc/afm/afmd.conf", root + "/usr/lib/afm/afmd.conf", root + "/afmd.conf"],
            dropInDirectories: [root + "/etc/afm/afmd.conf.d", root + "/usr/lib/afm/afmd.conf.d"],
            stateDirectory: root + "/var/lib/afm", runtimeDirectory: root + "/run/afm")
    }

    /// Picks the layout the way `afmd` does: `--config-root` → relocated; root or a systemd service → system;
    /// otherwise user. `configFile` (`--config FILE`) is kept as ``explicitMainFile``.
    public static func resolve(
        configRoot: String?, configFile: String?, environment: [String: String],
        effectiveUID: UInt32 = UserDatabase.effectiveUserID
    ) -> ConfigPaths {
        var paths: ConfigPaths
        if let configRoot, !configRoot.isEmpty {
            paths = relocated(under: configRoot)
        } else if effectiveUID == 0 || environment["INVOCATION_ID"] != nil || environment["STATE_DIRECTORY"] != nil {
            paths = system(environment: environment)
        } else {
            paths = user(environment: environment, uid: effectiveUID)
        }
        paths.explicitMainFile = configFile
        return paths
    }

    /// The runtime directory of a user without `XDG_RUNTIME_DIR`: `/tmp/afm-UID` (afmctl finds the socket there too).
    public static func sharedRuntimeDirectory(uid: UInt32) -> String { PrivateDirectory.sharedRuntimeDirectory(uid: uid) }

    private static func nonEmpty(_ value: String?) -> String? {
        guard let value, !value.isEmpty else { return nil }
        return value
    }

    /// systemd passes colon-separated lists when several directories are configured; the first is ours.
    private static func firstPath(_ value: String?) -> String? {
        nonEmpty(value).flatMap { $0.split(separator: ":").first.map(String.init) }
    }
}
