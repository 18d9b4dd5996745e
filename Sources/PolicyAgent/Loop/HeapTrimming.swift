import Glibc

/// The agent's heaps (glibc's malloc), kept from staying large after a burst: a server back with
/// thousands of streams, a load of clients coming and going. glibc keeps what is freed in its heaps
/// until asked (`malloc_trim`), and even then keeps the pages that still hold a live block among the
/// free ones (the README has the numbers: the agent's own memory after the load bench, and in use).
public enum Heap {
    /// Large blocks (128 KiB and more: a burst's arrays of thousands of effects, lines or streams) taken
    /// from the system and given back when freed, always. glibc's default raises that threshold up to
    /// the largest such block freed, after which the next ones land in the heap among small live blocks.
    /// Once, at the start of the process. Returns whether glibc took it.
    @discardableResult
    public static func keepLargeBlocksApart() -> Bool {
        mallopt?(mmapThreshold, 128 * 1024) == 1
    }

    /// The heaps' free pages given back to the system.
    static func trim() { _ = mallocTrim?(0) }

    /// `M_MMAP_THRESHOLD` in glibc's malloc.h (setting it also stops glibc from moving it).
    private static let mmapThreshold: Int32 = -3
    // (Neither function is in Swift's Glibc module: looked up once. nil: RTLD_DEFAULT.)
    private static let mallopt: (@convention(c) (Int32, Int32) -> Int32)? = dlsym(nil, "mallopt")
        .map { unsafeBitCast($0, to: (@convention(c) (Int32, Int32) -> Int32).self) }
    private static let mallocTrim: (@convention(c) (UInt) -> Int32)? = dlsym(nil, "malloc_trim")
        .map { unsafeBitCast($0, to: (@convention(c) (UInt) -> Int32).self) }
}

/// When the agent trims its heaps (`Heap.trim`): after a connection gained or lost (a whole picture of
/// the server taken or dropped), and every `inputs` inputs at the first batch after which nothing waits
/// in the inbox (the end of a burst, or once in a while in ordinary use); and only after a batch whose
/// commands are on the server's socket: a trim waits for the next batch rather than come before a
/// command.
struct HeapTrimming {
    static let inputs = 256

    private var handled = 0
    private var connection = false

    /// After a batch of `inputs` inputs: whether to trim now. `connection`: the batch gained or lost the
    /// server; `idle`: nothing waits in the inbox; `written`: the batch's commands, if any, are on the
    /// socket.
    mutating func after(inputs: Int, connection: Bool, idle: Bool, written: Bool) -> Bool {
        handled += inputs
        self.connection = self.connection || connection
        guard written, self.connection || (handled >= Self.inputs && idle) else { return false }
        (handled, self.connection) = (0, false)
        return true
    }
}
