import CSignalShim

/// Holds SIGXFSZ blocked on the calling thread while Aftermath writes on it, so a write past a
/// file-size limit (`ulimit -f`) fails with EFBIG instead of ending the app; ``release()``
/// takes back a SIGXFSZ those writes raised and restores the thread's mask. Threads created
/// meanwhile (Aftermath's own) keep it blocked.
final class FileSizeSignalHold {
    private var hold = aft_file_size_hold()

    init() { aft_hold_file_size_signal(&hold) }

    func release() { aft_release_file_size_signal(&hold) }
}
