// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMLogging
import Foundation

/// Writing to stdout/stderr and rendering replies for humans.
///
/// Replies carry text afmctl does not control (an upstream's error body in a backend's reason, a prompt, a path),
/// so nothing reaches the operator's terminal raw: every string value is rendered through ``TerminalSafeText``
/// with no control character kept (a `\n` in a reason cannot fake a line, a tab cannot shift a column, an ESC
/// cannot drive the terminal), and every write keeps only the line feeds and tabs afmctl itself lays out.
enum CtlOutput {
    /// Writes `text` and a line feed to standard output; control characters other than `\n` and `\t` are escaped.
    static func print(_ text: String) {
        FileHandle.standardOutput.write(Data((TerminalSafeText.neutralized(text, keeping: .messageText) + "\n").utf8))
    }

    /// Writes afmctl's own terminal control text (`top`'s redraw) unchanged; never pass reply text.
    static func raw(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// One line on standard error: every control character in `message` is escaped, so it stays one line.
    static func error(_ message: String, prefix: Bool = true) {
        let line = (prefix ? "Error: " : "") + TerminalSafeText.neutralized(message)
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// One progress line on standard error, escaped like ``error(_:prefix:)``.
    static func progress(_ message: String) {
        FileHandle.standardError.write(Data((TerminalSafeText.neutralized(message) + "\n").utf8))
    }

    /// A reply as JSON: the encoder escapes C0 controls; DEL, C1 controls and U+2028/9 become `\u00XX` escapes too,
    /// so the text stays valid JSON with the same meaning and holds nothing a terminal executes.
    static func json(_ value: JSONValue) -> String {
        TerminalSafeText.neutralized(value.jsonString, notation: .json)
    }

    /// A name or value from a reply, for one field of a line: every control character escaped.
    static func field(_ text: String) -> String { TerminalSafeText.neutralized(text) }

    /// A scalar as text (strings unquoted, null as "-"), with control characters escaped.
    static func scalar(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): field(text)
        case .null: "-"
        case .bool(let flag): flag ? "yes" : "no"
        case .number(let number): number.literal
        case .array(let items): items.map(scalar).joined(separator: ", ")
        case .object: json(value)
        }
    }

    /// An object as indented `key: value` lines; arrays of objects as indented blocks.
    static func outline(_ value: JSONValue, indent: String = "") -> [String] {
        guard case .object(let object) = value else { return [indent + scalar(value)] }
        var lines: [String] = []
        for (key, member) in object {
            switch member {
            case .object(let inner) where !inner.isEmpty:
                lines.append("\(indent)\(field(key)):")
                lines += outline(member, indent: indent + "  ")
            case .array(let items) where items.contains(where: { $0.objectValue != nil }):
                lines.append("\(indent)\(field(key)):")
                for item in items {
                    let block = outline(item, indent: indent + "    ")
                    if let first = block.first {
                        lines.append(indent + "  - " + first.dropFirst(indent.count + 4))
                        lines += block.dropFirst()
                    }
                }
            default:
                lines.append("\(indent)\(field(key)): \(scalar(member))")
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
                    parts.append("\(field(key)).\(field(innerKey))=\(scalar(innerValue))")
                }
            } else if member.arrayValue == nil {
                parts.append("\(field(key))=\(scalar(member))")
            }
        }
        return parts.joined(separator: " ")
    }

    // MARK: - Quotas (afmctl top)

    /// The monitor's `quota` list for humans, one line per backend and one per upstream:
    ///
    /// ```
    /// quota private-cloud: 3 requests, unlimited tokens left today; resets at 2026-12-01T00:00:00Z
    ///   http://10.0.0.5:8080/v1: 0 of 2 requests, unlimited tokens left (used up)
    /// ```
    static func quotaLines(_ quotas: JSONValue) -> [String] {
        var lines: [String] = []
        for quota in quotas.arrayValue ?? [] {
            let backend = scalar(quota["backend"] ?? .null)
            var line = "quota \(backend): \(remaining(quota)) left today"
            if quota["exhausted"]?.boolValue == true { line += " (used up)" }
            lines.append(line + "; resets at \(scalar(quota["resets_at"] ?? .null))")
            for upstream in quota["upstreams"]?.arrayValue ?? [] {
                let usedUp = upstream["exhausted"]?.boolValue == true ? " (used up)" : ""
                lines.append("  \(scalar(upstream["url"] ?? .null)): \(remaining(upstream)) left\(usedUp)")
            }
        }
        return lines
    }

    /// The monitor's `quota` list as `key=value` pairs for `line`: `quota.<backend>.<field>=…` and
    /// `quota.<backend>[<url>].<field>=…` for the remaining figures.
    static func quotaPairs(_ quotas: JSONValue) -> [String] {
        var pairs: [String] = []
        let fields = ["requests_remaining", "tokens_remaining"]
        for quota in quotas.arrayValue ?? [] {
            let prefix = "quota.\(scalar(quota["backend"] ?? .null))"
            for field in fields + ["resets_at"] { pairs.append("\(prefix).\(field)=\(scalar(quota[field] ?? .null))") }
            for upstream in quota["upstreams"]?.arrayValue ?? [] {
                let url = scalar(upstream["url"] ?? .null)
                for field in fields { pairs.append("\(prefix)[\(url)].\(field)=\(scalar(upstream[field] ?? .null))") }
            }
        }
        return pairs
    }

    // MARK: - Prompt caches (afmctl top)

    /// The monitor's `prompt_cache` list for humans, one line per backend:
    ///
    /// ```
    /// prompt cache local: RAM 12 entries, 190.3 of 2048 MiB; disk 30 entries, 480.0 of 8192 MiB; 40 hits (3 from disk), 10 misses, 5 evictions
    /// ```
    static func promptCacheLines(_ caches: JSONValue) -> [String] {
        (caches.arrayValue ?? []).map { cache in
            func count(_ key: String) -> String { cache[key]?.numberValue?.literal ?? "0" }
            func mib(_ key: String) -> String {
                String(format: "%.1f", (cache[key]?.numberValue.flatMap { Double($0.literal) } ?? 0) / 1_048_576)
            }
            var line = "prompt cache \(scalar(cache["backend"] ?? .null)): "
            line += "RAM \(count("ram_entries")) entries, \(mib("ram_bytes")) of \(mib("ram_limit_bytes")) MiB"
            if cache["directory"]?.stringValue != nil {
                line += "; disk \(count("disk_entries")) entries, \(mib("disk_bytes")) of \(mib("disk_limit_bytes")) MiB"
            }
            line += "; \(count("hits")) hits (\(count("disk_hits")) from disk), \(count("misses")) misses, "
            return line + "\(count("evictions")) evictions"
        }
    }

    /// The monitor's `prompt_cache` list as `key=value` pairs for `line`: `prompt_cache.<backend>.<field>=…`.
    static func promptCachePairs(_ caches: JSONValue) -> [String] {
        var pairs: [String] = []
        let fields = ["ram_bytes", "ram_entries", "disk_bytes", "disk_entries", "hits", "disk_hits", "misses", "evictions"]
        for cache in caches.arrayValue ?? [] {
            let prefix = "prompt_cache.\(scalar(cache["backend"] ?? .null))"
            for field in fields where cache[field] != nil { pairs.append("\(prefix).\(field)=\(scalar(cache[field] ?? .null))") }
        }
        return pairs
    }

    /// "3 of 5 requests, unlimited tokens" from `requests_remaining`/`daily_request_quota` and the token pair.
    private static func remaining(_ quota: JSONValue) -> String {
        func part(_ noun: String, _ left: JSONValue?, _ limit: JSONValue?) -> String {
            guard let left = left?.numberValue else { return "unlimited \(noun)" }
            guard let limit = limit?.numberValue else { return "\(left.literal) \(noun)" }
            return "\(left.literal) of \(limit.literal) \(noun)"
        }
        return part("requests", quota["requests_remaining"], quota["daily_request_quota"]) + ", "
            + part("tokens", quota["tokens_remaining"], quota["daily_token_quota"])
    }
}
