// SPDX-License-Identifier: Apache-2.0
import AFMClient

/// The model a one-shot command (`afm respond`, `afm agent`) asks: the one named, else the gateway's first.
enum GatewayModel {
    /// `chosen`, or the first model `client`'s gateway serves; nil (after saying why on standard error) when the
    /// gateway serves none or cannot be reached: the caller exits with `model_unavailable`'s status.
    static func resolve(_ chosen: String?, client: ResponsesClient, console: Console) -> String? {
        if let chosen { return chosen }
        do {
            guard let first = try client.listModels().first else {
                console.error("afm: the gateway at \(client.url) serves no models")
                return nil
            }
            return first
        } catch {
            console.error("afm: cannot reach the gateway at \(client.url): \(error)")
            return nil
        }
    }
}
