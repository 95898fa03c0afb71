// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Foundation

/// Writing to stdout/stderr and rendering replies for humans.
enum CtlOutput {
    static func print(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func raw(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    static func error(_ message: String, prefix: Bool = true) {
        FileHandle.standardError.write(Data(((prefix ? "Error: " : "") + message + "\n").utf8))
    }

    static func progress(_ message: String) {
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }

    /// A scalar as text (strings unquoted, null as "-").
    static func scalar(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): text
        case .null: "-"
        case .bool(let flag): flag ? "yes" : "no"
        case .number(let number): number.literal
        case .array(let items): items.map(scalar).joined(separator: ", ")
        case .object: value.jsonString
        }
    }

    /// An object as indented `key: value` lines; arrays of objects as indented blocks.
    static func outline(_ value: JSONValue, indent: String = "") -> [String] {
        guard case .object(let object) = value else { return [indent + scalar(value)] }
        var lines: [String] = []
        for (key, member) in object {
            switch member {
            case .object(let inner) where !inner.isEmpty:
                lines.append("\(indent)\(key):")
                lines += outline(member, indent: indent + "  ")
            case .array(let items) where items.contains(where: { $0.objectValue != nil }):
                lines.append("\(indent)\(key):")
                for item in items {
                    let block = outline(item, indent: indent + "    ")
                    if let first = block.first {
                        lines.append(indent + "  - " + first.dropFirst(indent.count + 4))
                        lines += block.dropFirst()
                    }
                }
            default:
                lines.append("\(indent)\(key): \(scalar(member))")
            }
        }
        return lines
    }

    /// Top-level scalars and one level of nested scalars as `key=value` pairs on one line.
    static func line(_ value: JSONValue) -> String {
        guard case .object(let object) = value else { return scalar(value) }
        var parts: [String] = []
        for (key, member) in object {
            if case .object(let inner) = member {
                for (innerKey, innerValue) in inner where innerValue.objectValue == nil && innerValue.arrayValue == nil {
                    parts.append("\(key).\(innerKey)=\(scalar(innerValue))")
                }
            } else if member.arrayValue == nil {
                parts.append("\(key)=\(scalar(member))")
            }
        }
        return parts.joined(separator: " ")
    }
}
