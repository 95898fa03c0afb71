// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON

/// What a dialect does with each top-level field of its request body: one table per dialect drives both the
/// validation of that dialect and its documentation page (a test compares the two).
///
/// DESIGN §4: refuse what the gateway cannot do instead of emulating it, but accept the fields real clients send
/// routinely and that do not change the answer.
public struct PolicyTable: Sendable {
    /// What happens to one field.
    public enum Disposition: Sendable, Hashable {
        /// Honoured.
        case supported
        /// Accepted and has no effect (the Responses dialect echoes it in the response object).
        case ignored
        /// Refused with 400 and this error code (null is always accepted, and so is `accepted` when given).
        case rejected(code: String, message: String)
    }

    /// One row of the table.
    public struct Field: Sendable {
        public var name: String
        public var disposition: Disposition
        /// The documentation's note.
        public var note: String
        /// A value a rejected field may still have (`background: false`), besides null.
        public var accepted: JSONValue?

        public init(_ name: String, _ disposition: Disposition, _ note: String, accepted: JSONValue? = nil) {
            self.name = name
            self.disposition = disposition
            self.note = note
            self.accepted = accepted
        }
    }

    /// Every top-level field the dialect knows, in documentation order.
    public let fields: [Field]
    private let index: [String: Int]
    /// Whether the field at each position is rejected: the check of an accepted body reads only this, not the
    /// rows (a row copied out of the table costs a retain and a release of each of its strings, per body member).
    private let rejected: [Bool]

    public init(_ fields: [Field]) {
        self.fields = fields
        index = Dictionary(uniqueKeysWithValues: fields.enumerated().map { ($1.name, $0) })
        rejected = fields.map { if case .rejected = $0.disposition { true } else { false } }
    }

    /// The disposition of a top-level field, or nil when the dialect does not know it.
    public func disposition(of field: String) -> Disposition? {
        index[field].map { fields[$0].disposition }
    }

    /// Refuses unknown fields (400 `unknown_parameter`) and rejected ones (400 with their code), each with its name
    /// in `param`.
    public func check(_ object: JSONObject) throws(AFMError) {
        for (key, value) in object {
            guard let position = index[key] else {
                throw AFMError(.invalidRequest, "Unknown parameter: '\(key)'.", param: key, publicCode: "unknown_parameter")
            }
            guard rejected[position] else { continue }
            let field = fields[position]
            guard case .rejected(let code, let message) = field.disposition else { continue }
            if value.isNull || (field.accepted.map { $0 == value } ?? false) { continue }
            throw AFMError(.invalidRequest, message, param: key, publicCode: code)
        }
    }
}
