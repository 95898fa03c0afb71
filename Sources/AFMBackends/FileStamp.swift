// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Size and modification time of a file, to notice a file replaced in place (a new model at the same path).
struct FileStamp: Sendable, Hashable {
    var size: UInt64
    var modified: Date

    /// Stamps of the settings values that are absolute paths of existing regular files.
    static func stamps(ofFilesIn settings: [String: String]) -> [String: FileStamp] {
        var stamps: [String: FileStamp] = [:]
        for value in settings.values where value.hasPrefix("/") {
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: value),
                attributes[.type] as? FileAttributeType == .typeRegular,
                let size = attributes[.size] as? NSNumber, let modified = attributes[.modificationDate] as? Date
            else { continue }
            stamps[value] = FileStamp(size: size.uint64Value, modified: modified)
        }
        return stamps
    }
}
