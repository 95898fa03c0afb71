// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Foundation

/// The manifest that sits next to every backend library: `scripted.json` beside `scripted.so`.
///
/// The host reads it before loading any code, so a backend built for another ABI major is refused without
/// running a single instruction of it (the Vulkan-manifest idea).
///
/// ```json
/// {"manifest_version":1,"id":"scripted","library":"scripted.so","abi_major":1,
///  "version":"1.0.0","hosting":"in-process","description":"…","environment":["AFM_SCRIPTED_DEBUG"]}
/// ```
public struct BackendManifest: Sendable, Hashable {
    /// How a backend is hosted.
    public enum Hosting: String, Sendable, Hashable {
        /// Loaded into `afmd` with `dlopen`.
        case inProcess = "in-process"
        /// Loaded by `afm-backend-runner` in its own process.
        case runner
    }

    /// The manifest file this was read from.
    public var manifestPath: String
    /// The backend id; also the name of its config section and its admin name.
    public var id: String
    /// Absolute path of the shared object.
    public var libraryPath: String
    /// The ABI major the library was built for.
    public var abiMajor: Int
    /// The backend's own version, as packaged.
    public var version: String?
    /// Where the manifest asks to be hosted.
    public var hosting: Hosting
    /// A one-line description for status output.
    public var description: String?
    /// The daemon's environment variables a runner of this backend gets (its own debug and tuning switches), by
    /// exact name: nothing else of the daemon's environment reaches it (docs/backend-abi.md §2).
    public var environment: [String]

    /// Reads and validates a manifest file.
    ///
    /// - Throws: `BackendLoadError` naming the file and the problem.
    public init(contentsOf path: String) throws(BackendLoadError) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw BackendLoadError(path: path, "cannot read manifest: \(error.localizedDescription)")
        }
        let document: JSONValue
        do {
            document = try JSONParser.parse([UInt8](data))
        } catch {
            throw BackendLoadError(path: path, "manifest is not valid JSON: \(error.message)")
        }
        guard let object = document.objectValue else {
            throw BackendLoadError(path: path, "manifest must be a JSON object")
        }
        guard object["manifest_version"]?.numberValue?.intValue == 1 else {
            throw BackendLoadError(path: path, "manifest_version must be 1")
        }
        guard let id = object["id"]?.stringValue, Self.isValidID(id) else {
            throw BackendLoadError(
                path: path, "manifest 'id' must be 1–64 characters of a-z, 0-9, '.', '-' and '_'")
        }
        guard let abiMajor = object["abi_major"]?.numberValue?.intValue else {
            throw BackendLoadError(path: path, "manifest 'abi_major' must be an integer")
        }
        let library = object["library"]?.stringValue ?? "\(id).so"
        guard !library.isEmpty, !library.contains("/") else {
            throw BackendLoadError(path: path, "manifest 'library' must be a file name in the manifest's directory")
        }
        let hostingName = object["hosting"]?.stringValue ?? Hosting.runner.rawValue
        guard let hosting = Hosting(rawValue: hostingName) else {
            throw BackendLoadError(path: path, "manifest 'hosting' must be \"in-process\" or \"runner\", not \"\(hostingName)\"")
        }
        var environment: [String] = []
        if let list = object["environment"] {
            // Exact names only, each in the backend's own AFM_<ID>_ namespace: a prefix or a pattern would hand
            // the backend whatever else shares it (another component's keys, afmd's own AFM_SERVER_*).
            let own = Self.environmentPrefix(id)
            guard let names = list.arrayValue?.compactMap(\.stringValue), names.count == list.arrayValue?.count,
                names.count <= 64,
                names.allSatisfy({ $0.hasPrefix(own) && $0.count > own.count && Self.isEnvironmentName($0) })
            else {
                throw BackendLoadError(
                    path: path, "manifest 'environment' must be a list of variable names that start with \(own)")
            }
            environment = names
        }
        let directory = (path as NSString).deletingLastPathComponent
        self.manifestPath = path
        self.id = id
        self.libraryPath = (directory as NSString).appendingPathComponent(library)
        self.abiMajor = abiMajor
        self.version = object["version"]?.stringValue
        self.hosting = hosting
        self.description = object["description"]?.stringValue
        self.environment = environment
    }

    /// `AFM_<ID>_`: the id uppercased, characters other than letters and digits as `_` (`AFM_LOCAL_` for `local`).
    static func environmentPrefix(_ id: String) -> String {
        "AFM_" + String(id.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" }) + "_"
    }

    static func isEnvironmentName(_ name: String) -> Bool {
        name.utf8.count <= 128 && name.unicodeScalars.allSatisfy { ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
    }

    /// Lists the manifests (`*.json`) of a backend directory, sorted by file name.
    public static func manifestPaths(in directory: String) throws(BackendLoadError) -> [String] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw BackendLoadError(path: directory, "cannot list backend directory: \(error.localizedDescription)")
        }
        return names.filter { $0.hasSuffix(".json") }.sorted().map { (directory as NSString).appendingPathComponent($0) }
    }

    static func isValidID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64
            && id.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "." || $0 == "-" || $0 == "_" }
    }
}
