// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMHTTP

extension AFMError {
    /// The gateway's error for a ``BrowserRequestPolicy`` refusal: the same code and status, and a message naming
    /// the `[Server]` setting that would allow the request.
    init(_ refusal: BrowserRequestPolicy.Refusal) {
        let message: String
        switch refusal {
        case .forbiddenHost:
            message = "The Host header names no address of this gateway (a protection against DNS rebinding); "
                + "list further names in [Server] AllowedHosts."
        case .forbiddenOrigin:
            message = "Requests from the web origin in the Origin header are not allowed (a protection against cross-site "
                + "requests); list allowed origins in [Server] AllowedOrigins."
        case .duplicateHeader, .unsupportedMediaType:
            message = refusal.message
        }
        self.init(.invalidRequest, message, param: refusal.param, publicCode: refusal.code, httpStatus: refusal.status)
    }
}
