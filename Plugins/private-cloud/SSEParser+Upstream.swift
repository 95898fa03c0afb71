// SPDX-License-Identifier: Apache-2.0
import AFMSSE

extension SSEParser.Overflow {
    /// The overflow as the plugin reports it: the upstream sent it, and the setting that raises the cap is named.
    var upstreamDescription: String {
        switch self {
        case .line: "the upstream sent \(description)"
        case .event: "the upstream sent \(description) (MaxEventBytes)"
        case .total: "the upstream sent \(description) (MaxStreamBytes)"
        }
    }
}
