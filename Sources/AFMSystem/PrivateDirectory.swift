// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc

/// A directory only its owner may use, in a place other users can write to (the `/tmp/afm-UID` fallback of the
/// runtime directory when `XDG_RUNTIME_DIR` is unset).
///
/// In a world-writable directory another local user can create the name first: afmctl would then talk to their
/// fake admin socket, and afmd would `dlopen` backend copies they can swap. So the directory is trusted only when
/// it is a real directory (not a symlink), owned by the expected user, with mode exactly `0700`. `/tmp`'s sticky
/// bit keeps others from renaming or removing it once it passed.
public enum PrivateDirectory {
    /// Creates `path` with mode `0700` when it is missing, then verifies it without following a symlink.
    ///
    /// - Parameter owner: the user that must own it (the effective uid of the caller).
    /// - Throws: ``PrivateDirectoryError`` naming the path, its owner and its mode when it cannot be trusted.
    /// The corresponding C functions are `mkdir`, `chmod`, `open` (`O_PATH | O_NOFOLLOW | O_DIRECTORY`) and `fstat`.
    public static func prepare(_ path: String, owner: UInt32 = UserDatabase.effectiveUserID) throws(PrivateDirectoryError) {
        // mkdir never follows a symlink at the last component: an existing name of any kind gives EEXIST.
        let created = mkdir(path, 0o700) == 0
        if !created && errno != EEXIST {
            throw PrivateDirectoryError(path: path, problem: .system(SystemCallError(call: "mkdir", errno: .current)))
        }
        // We made it, in a sticky directory: nobody else can rename or replace it, so the path is still ours. A umask
        // such as 0777 would have narrowed the mode we asked for.
        if created { chmod(path, 0o700) }
        // O_PATH: the checks below need no permission on the directory (another user's 0700 one must be reported,
        // not fail with EACCES).
        let raw = open(path, Self.pathOnly | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard raw >= 0 else {
            let reason = Errno.current
            var info = stat()
            if lstat(path, &info) == 0, reason.rawValue == ELOOP || reason.rawValue == ENOTDIR {
                let kind = info.st_mode & S_IFMT == S_IFLNK ? "a symbolic link" : "not a directory"
                throw PrivateDirectoryError(
                    path: path, problem: .untrusted(kind: kind, owner: info.st_uid, mode: UInt32(info.st_mode & 0o7777), expectedOwner: owner))
            }
            throw PrivateDirectoryError(path: path, problem: .system(SystemCallError(call: "open", errno: reason)))
        }
        defer { close(raw) }
        var info = stat()
        guard fstat(raw, &info) == 0 else {
            throw PrivateDirectoryError(path: path, problem: .system(SystemCallError(call: "fstat", errno: .current)))
        }
        let mode = UInt32(info.st_mode & 0o7777)
        guard info.st_uid == owner, mode == 0o700 else {
            throw PrivateDirectoryError(
                path: path, problem: .untrusted(kind: "a directory", owner: info.st_uid, mode: mode, expectedOwner: owner))
        }
    }

    /// The runtime directory of a user without `XDG_RUNTIME_DIR`, `/tmp/afm-UID`: one name for afmd (through
    /// `ConfigPaths`) and afmctl, which must find the socket afmd made there. It is in world-writable `/tmp`, so
    /// callers pass it through ``prepare(_:owner:)`` before use.
    public static func sharedRuntimeDirectory(uid: UInt32) -> String { "/tmp/afm-\(uid)" }

    /// Whether every user may write to the directory holding `path` (`/tmp`, `/var/tmp`):
    /// a name there may have been created by anyone. The corresponding C function is `stat` (following links).
    public static func parentIsWritableByOthers(_ path: String) -> Bool {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return parentIsWritableByOthers("./" + path) }
        let parent = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
        var info = stat()
        guard stat(parent, &info) == 0 else { return false }
        return info.st_mode & S_IWOTH != 0
    }

    /// Whether `base/components…` belongs to `owner` alone: every entry from `base`'s child down to the last is
    /// owned by `owner` and is no symbolic link, and no directory among them is writable by other users (a group
    /// write bit counts only for a group other than the owner's private one, ``UserDatabase/isPrivateGroup(_:of:)``:
    /// under a umask of 002 every directory has it); `base`
    /// itself may be anyone's but, when other users may write to it (all, or a group that is not the owner's private
    /// one), must be sticky (as `/tmp` is: nobody else can then rename or replace what `owner` made in it). A path that fails could be, or become, another user's.
    /// The corresponding C function is `lstat`.
    public static func isOwned(base: String, components: [String], owner: UInt32) -> Bool {
        var info = stat()
        guard stat(base, &info) == 0 else { return false }
        // Another user who may write to `base` could rename our `.build` between this check and the connect.
        if info.st_mode & S_ISVTX == 0 {
            guard info.st_mode & S_IWOTH == 0 else { return false }
            if info.st_mode & S_IWGRP != 0 && !UserDatabase.isPrivateGroup(info.st_gid, of: owner) { return false }
        }
        var path = base == "/" ? "" : base
        for (index, component) in components.enumerated() {
            path += "/" + component
            guard lstat(path, &info) == 0, info.st_uid == owner, info.st_mode & S_IFMT != S_IFLNK else { return false }
            // The last entry (a socket) may be connectable by all; only directories must be closed to others.
            if index < components.count - 1 {
                guard info.st_mode & S_IFMT == S_IFDIR, info.st_mode & S_IWOTH == 0 else { return false }
                if info.st_mode & S_IWGRP != 0 && !UserDatabase.isPrivateGroup(info.st_gid, of: owner) { return false }
            }
        }
        return true
    }

    /// `O_PATH` (<asm-generic/fcntl.h>, the same on x86_64 and aarch64), which Glibc exports only with _GNU_SOURCE.
    private static let pathOnly: Int32 = 0o10_000_000
}

/// Why ``PrivateDirectory/prepare(_:owner:)`` refused a directory.
public struct PrivateDirectoryError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What was wrong.
    public enum Problem: Hashable, Sendable {
        /// It exists but is not ours alone: `kind` ("a directory", "a symbolic link", "not a directory"), its owner
        /// and permission bits.
        case untrusted(kind: String, owner: UInt32, mode: UInt32, expectedOwner: UInt32)
        /// A system call failed.
        case system(SystemCallError)
    }

    /// The directory.
    public var path: String
    /// What was wrong.
    public var problem: Problem
    /// What the user can do about an untrusted directory (the end of ``description``).
    public var remedy = "remove it, or set XDG_RUNTIME_DIR"

    /// Creates an error.
    public init(path: String, problem: Problem) {
        self.path = path
        self.problem = problem
    }

    /// For example "/tmp/afm-1000 is not a private directory: it is a directory with owner uid 65534 and mode 0700
    /// (it needs owner uid 1000 and mode 0700; another user may have created it). Refusing to use it: …".
    public var description: String {
        switch problem {
        case .untrusted(let kind, let owner, let mode, let expectedOwner):
            let octal = String(mode, radix: 8)
            return "\(path) is not a private directory: it is \(kind) with owner uid \(owner) and mode "
                + "\(String(repeating: "0", count: max(0, 4 - octal.count)) + octal) (it needs owner uid \(expectedOwner) "
                + "and mode 0700; another user may have created it). Refusing to use it: \(remedy)"
        case .system(let error):
            return "\(path): cannot prepare the private directory: \(error)"
        }
    }
}
