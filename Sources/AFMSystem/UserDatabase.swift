// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc

/// Look-ups in the user and group database (`/etc/passwd`, `/etc/group`, NSS) and the identity of this process.
public enum UserDatabase {
    /// The real user id of this process. The corresponding C function is `getuid`.
    public static var currentUserID: UInt32 { getuid() }

    /// The effective user id of this process. The corresponding C function is `geteuid`.
    public static var effectiveUserID: UInt32 { geteuid() }

    /// The process id of this process. The corresponding C function is `getpid`.
    public static var processID: Int32 { getpid() }

    /// The id of group `name`, or `nil` when there is no such group. A decimal string is taken as an id.
    /// The corresponding C function is `getgrnam_r`.
    public static func groupID(named name: String) -> UInt32? {
        if let number = UInt32(name) { return number }
        var group = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        let status = getgrnam_r(name, &group, &buffer, buffer.count, &result)
        guard status == 0, let found = result else { return nil }
        return found.pointee.gr_gid
    }

    /// The home directory of user `uid` in the user database, or nil when it has no entry (or an empty home).
    /// The corresponding C function is `getpwuid_r`.
    public static func homeDirectory(of uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        let status = getpwuid_r(uid, &entry, &buffer, buffer.count, &result)
        guard status == 0, let found = result, let directory = found.pointee.pw_dir else { return nil }
        let home = String(cString: directory)
        return home.isEmpty ? nil : home
    }

    /// Whether `gid` is the private group of user `uid` (Debian's user-private-group scheme, under which the umask is
    /// 002): the user's primary group, named like the user, with no other member. Writable by that group means
    /// writable by the user alone. The corresponding C functions are `getpwuid_r` and `getgrgid_r`.
    public static func isPrivateGroup(_ gid: UInt32, of uid: UInt32) -> Bool {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &found) == 0, let user = found, user.pointee.pw_gid == gid,
            let userName = user.pointee.pw_name
        else { return false }
        let name = String(cString: userName)
        var group = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>?
        var groupBuffer = [CChar](repeating: 0, count: 16_384)
        guard getgrgid_r(gid, &group, &groupBuffer, groupBuffer.count, &result) == 0, let entry = result,
            let groupName = entry.pointee.gr_name, String(cString: groupName) == name
        else { return false }
        var member = entry.pointee.gr_mem
        while let pointer = member, let text = pointer.pointee {
            if String(cString: text) != name { return false }
            member = pointer + 1
        }
        return true
    }

    /// Whether file descriptor `fd` (0: stdin, 1: stdout, 2: stderr) is a terminal.
    /// The corresponding C function is `isatty`.
    public static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }
}
