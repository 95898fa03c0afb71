// SPDX-License-Identifier: Apache-2.0

/// The page of the web chat, compiled into `afm` (SwiftPM `embedInCode` of `Assets/`): nothing is fetched from
/// anywhere else, and an installed `afm` needs no files next to it.
enum WebChatAssets {
    static var html: [UInt8] { PackageResources.index_html }
    static var script: [UInt8] { PackageResources.app_js }
    static var style: [UInt8] { PackageResources.app_css }
    static var icon: [UInt8] { PackageResources.icon_svg }
}
