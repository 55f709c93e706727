import Aftermath
import AftermathNextLaunch
import AftermathOTLP
import AftermathTesting
import AftermathSymbolication
import HarnessSupport
import CHarnessFaults
import Foundation

/// One line of exception.stacktrace, symbolicated when its image could be found.
struct StackFrame: Sendable {
    var index: Int
    /// The image name as the record carries it; nil for a `???` frame.
    var imageName: String?
    var address: UInt64
    /// Offset from the image's load address.
    var offset: UInt64?
    /// The demangled function, when symbolication found one.
    var symbol: String?

    var description: String {
        let location = imageName.map { "\($0) + 0x\(String(offset ?? 0, radix: 16))" } ?? "???"
        return "\(index) 0x\(String(address, radix: 16)) \(location) \(symbol ?? "")"
    }
}

/// One entry of apsio.crash.images.
struct ImageEntry: Decodable, Sendable {
    var name: String
    var buildID: String
    var loadAddress: String
    var arch: String
    var inApp: Bool

    enum CodingKeys: String, CodingKey {
        case name, arch
        case buildID = "build_id"
        case loadAddress = "load_address"
        case inApp = "in_app"
    }

    var loadAddressValue: UInt64? { parseHex(loadAddress) }

    /// A GNU build id as SHA-1 (what GNU ld and lld write by default): 40 hex digits.
    var hasSHA1BuildID: Bool {
        buildID.count == 40 && buildID.allSatisfy { $0.isHexDigit && !$0.isUppercase }
    }

    static func decodeList(_ json: String) throws -> [ImageEntry] {
        try JSONDecoder().decode([ImageEntry].self, from: Data(json.utf8))
    }
}

/// Parses exception.stacktrace and symbolicates it against the files on this machine.
///
/// Records carry image names, not paths. The children are this very executable, so their
/// images are the ones loaded here: a name resolves to the path this process mapped it from,
/// and the build id in apsio.crash.images guards against a different file of the same name.
struct CrashStack {
    private let symbolicator = Symbolicator()
    private let paths: [String: String]

    init() { paths = Self.loadedImagePaths() }

    /// `"<index> <image> 0x<address> + 0x<offset>"` or `"<index> ??? 0x<address>"`, one a line.
    static func parse(_ text: String) -> [StackFrame] {
        text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ").map(String.init)
            if parts.count == 3, parts[1] == "???", let index = Int(parts[0]), let address = parseHex(parts[2]) {
                return StackFrame(index: index, imageName: nil, address: address)
            }
            guard parts.count >= 5, parts[parts.count - 2] == "+", let index = Int(parts[0]),
                let address = parseHex(parts[parts.count - 3]),
                let offset = parseHex(parts[parts.count - 1])
            else { return nil }
            let name = parts[1..<(parts.count - 3)].joined(separator: " ")
            return StackFrame(index: index, imageName: name, address: address, offset: offset)
        }
    }

    /// The frames of `text`, each with its function when its image is found here.
    func symbolicate(_ text: String, images: [ImageEntry]) -> [StackFrame] {
        let byName = Dictionary(images.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        return Self.parse(text).map { frame in
            var frame = frame
            guard let name = frame.imageName, let offset = frame.offset, let path = paths[name],
                let image = byName[name], let load = image.loadAddressValue
            else { return frame }
            let hit = symbolicator.symbolicate(
                address: load &+ offset, imagePath: path, loadAddress: load,
                isReturnAddress: frame.index > 0, expectedBuildID: parseHexBytes(image.buildID))
            frame.symbol = hit?.demangled
            return frame
        }
    }

    /// File name → path of every file this process has mapped (from /proc/self/maps).
    static func loadedImagePaths() -> [String: String] {
        guard let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8) else { return [:] }
        var paths: [String: String] = [:]
        for line in maps.split(separator: "\n") {
            guard let slash = line.firstIndex(of: "/") else { continue }
            let path = String(line[slash...])
            paths[(path as NSString).lastPathComponent] = path
        }
        return paths
    }
}

func parseHex(_ text: String) -> UInt64? {
    guard text.hasPrefix("0x") else { return nil }
    return UInt64(text.dropFirst(2), radix: 16)
}

func parseHexBytes(_ text: String) -> [UInt8]? {
    guard text.count % 2 == 0, !text.isEmpty else { return nil }
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
        bytes.append(byte)
        index = next
    }
    return bytes
}
