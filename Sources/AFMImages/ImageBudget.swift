// SPDX-License-Identifier: Apache-2.0

/// What images cost a request, by the gateway's rules: how many one request may carry and what one counts in the
/// input estimate. The gateway enforces these (AFMResponses); a client that builds requests for it (the agent
/// runtime) plans with the same figures, so it is never refused for what it could have known.
public enum ImageBudget {
    /// At most this many images per request, across the whole history (more: 400 `too_many_images`).
    public static let maximumImagesPerRequest = 4

    /// What one image counts in the input estimate of a backend without a tokenizer (OpenAI's figure for a
    /// 512-px tile at high detail).
    public static let estimatedTokensPerImage = 765
}
