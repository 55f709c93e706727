import AftermathNextLaunch
import CSignalShim
import Foundation
import Synchronization

/// Writes handled errors to errors/ before ``Aftermath/record(error:fingerprint:)`` returns:
/// one small file each, written to a .tmp and renamed. The loaded images are taken at the first
/// error (those the crash handler read at start) and read again only when a frame falls outside
/// all of them (a library loaded later).
enum HandledErrorRecorder {
    struct State: @unchecked Sendable {  // aft_context and aft_image are plain C values
        var directory: String?
        var context = aft_context()
        var images: [aft_image] = []  // sorted by start
        var maxPending = 256
        var pending = -1  // not counted yet: counted at the first error, not by start
        var dropped = 0
    }

    static let state = Mutex(State())

    /// Prepares the recorder for a run: its directory and context. The images wait for the
    /// first error: start does not pay for them.
    static func prepare(directory: String, maxPending: Int) {
        let images: [aft_image] = []
        state.withLock {
            $0.directory = directory
            aft_installed_context(&$0.context)  // as the crash handler holds it
            $0.images = images
            $0.maxPending = maxPending
            $0.pending = -1
        }
    }

    /// The errors dropped since the last call (errors/ was full), now counted by the caller.
    static func takeDropped() -> Int {
        state.withLock { s in
            defer { s.dropped = 0 }
            return s.dropped
        }
    }

    /// The errors dropped since the last ``takeDropped()``, left counted.
    static var droppedCount: Int { state.withLock { $0.dropped } }

    /// Gives back a count the caller could not report.
    static func restoreDropped(_ n: Int) {
        state.withLock { $0.dropped += n }
    }

    /// The session later errors carry.
    static func setSession(_ id: UUID) {
        state.withLock { s in withUnsafeMutableBytes(of: &s.context.session_id) { $0.copyBytes(from: id.bytes) } }
    }

    /// Writes one error. Returns false when nothing was written (not started, errors/ full,
    /// or the disk refused).
    static func write(
        type: String, message: String, fingerprint: String?, frames: [UInt64],
        swiftAsync: [aft_swift_async_link] = []
    ) -> Bool {
        let resumes = swiftAsync.map(\.resume)
        guard
            var snapshot = state.withLock({ s -> State? in
                guard s.directory != nil else { return nil }
                if s.pending < 0 || s.pending >= s.maxPending {
                    s.pending = countPending(s.directory!, upTo: s.maxPending)
                    if s.pending >= s.maxPending {
                        s.dropped += 1
                        return nil
                    }
                }
                s.pending += 1
                return s
            }), let directory = snapshot.directory
        else { return false }

        var used = usedImages(frames + resumes, snapshot.images)
        if used == nil {
            // The run's first error takes the images read at start; a frame outside them (a
            // library loaded since) reads /proc/self/maps again.
            var fresh = snapshot.images.isEmpty ? installedImages() : loadImages()
            used = usedImages(frames + resumes, fresh)
            if used == nil, snapshot.images.isEmpty {
                fresh = loadImages()
                used = usedImages(frames + resumes, fresh)
            }
            state.withLock { $0.images = fresh }
            snapshot.images = fresh
        }
        let run = RunRecorder.state.withLock { $0 }
        var info = aft_error_info()
        let id = UUID()
        withUnsafeMutableBytes(of: &info.error_id) { $0.copyBytes(from: id.bytes) }
        if let previous = run.previousSessionID {
            withUnsafeMutableBytes(of: &info.previous_session_id) { $0.copyBytes(from: previous.bytes) }
        }
        info.time_realtime_ns = Clock.realtimeNanoseconds()
        info.thread_id = aft_gettid()
        info.is_main_thread = info.thread_id == UInt64(getpid()) ? 1 : 0
        withUnsafeMutableBytes(of: &info.screen) { CString.write(run.screen ?? "", intoBytes: $0) }
        let messageBytes = Array(message.utf8)
        let cut = utf8Prefix(messageBytes, Int(AFT_ERROR_MESSAGE_CAPACITY))
        info.message_truncated = cut.count < messageBytes.count ? 1 : 0
        let bytes = HandledErrorFile.encode(
            .init(
                context: snapshot.context, info: info,
                type: utf8Prefix(Array(type.utf8), Int(AFT_ERROR_TYPE_CAPACITY)), message: cut,
                fingerprint: fingerprint.map { utf8Prefix(Array($0.utf8), Int(AFT_ERROR_FINGERPRINT_CAPACITY)) },
                frames: Array(frames.prefix(Int(AFT_ERROR_MAX_FRAMES))), images: used ?? [],
                swiftAsync: swiftAsync))
        let name = Hex.encode(id.bytes) + ".error"
        let ok = writeFile(directory: directory, name: name, bytes: bytes)
        if !ok { state.withLock { $0.pending -= 1 } }
        return ok
    }

    /// Writes bytes to directory/name.tmp, then renames it to name.
    static func writeFile(directory: String, name: String, bytes: [UInt8]) -> Bool {
        let tmp = directory + "/" + name + ".tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return false }
        _ = fchmod(fd, 0o600)  // whatever the umask
        var written = 0
        let ok: Bool = bytes.withUnsafeBytes { raw in
            while written < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + written, raw.count - written)
                if n < 0, errno == EINTR { continue }
                if n <= 0 { return false }
                written += n
            }
            return true
        }
        close(fd)
        guard ok, rename(tmp, directory + "/" + name) == 0 else {
            unlink(tmp)
            return false
        }
        return true
    }

    /// The images the frames fall in; nil when a frame falls in none (refresh and retry).
    static func usedImages(_ frames: [UInt64], _ sorted: [aft_image]) -> [aft_image]? {
        var used: [aft_image] = []
        for frame in frames where frame != 0 {
            var low = 0, high = sorted.count
            while low < high {
                let mid = (low + high) / 2
                if sorted[mid].start <= frame { low = mid + 1 } else { high = mid }
            }
            guard low > 0, frame < sorted[low - 1].end else { return nil }
            let image = sorted[low - 1]
            if !used.contains(where: { $0.start == image.start }) { used.append(image) }
        }
        return used
    }

    /// The images the crash handler read at install: no second read of /proc/self/maps at start.
    static func installedImages() -> [aft_image] {
        var images = [aft_image](repeating: aft_image(), count: Int(AFT_MAX_IMAGES))
        let n = aft_installed_images(&images, UInt32(images.count))
        return n > 0 ? images.prefix(Int(n)).sorted { $0.start < $1.start } : loadImages()
    }

    static func loadImages() -> [aft_image] {
        let fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var images = [aft_image](repeating: aft_image(), count: Int(AFT_MAX_IMAGES))
        var truncated: UInt32 = 0
        let n = Aftermath.executablePath().withCString {
            aft_images_from_maps_fd(fd, &images, UInt32(images.count), 1, $0, &truncated)
        }
        return images.prefix(Int(n)).sorted { $0.start < $1.start }
    }

    /// Pending errors, counted up to limit: a directory of 10,000 files costs start no more
    /// than the limit's worth of readdir.
    static func countPending(_ directory: String, upTo limit: Int = Int.max) -> Int {
        StoreFiles.count(in: directory, suffix: ".error", upTo: limit)
    }

    /// The longest prefix of at most limit bytes that does not cut a UTF-8 character.
    static func utf8Prefix(_ bytes: [UInt8], _ limit: Int) -> [UInt8] {
        guard bytes.count > limit else { return bytes }
        var end = limit
        while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return Array(bytes[..<end])
    }
}
