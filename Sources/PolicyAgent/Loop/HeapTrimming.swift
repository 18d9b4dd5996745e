#if canImport(Glibc)
import Glibc
#endif

/// The agent's heaps (glibc's malloc), kept from growing for good after a burst: a server back with
/// thousands of streams, a load of clients coming and going. glibc keeps what is freed in its heaps
/// until asked, and freed pages between pages still in use cannot be given back at all: by hand on
/// PipeWire 0.3 after the load, the agent's own memory was 9.2 MB with 0.86 MB of it in use, and 6.3 MB
/// after a trim.
public enum Heap {
    /// Large blocks (128 KiB and more: a burst's arrays of thousands of effects, lines or streams) taken
    /// from the system and given back when freed, always. glibc's default raises that threshold up to
    /// the largest such block freed, after which the next ones land in the heap and leave it full of
    /// holes (the load bench on PipeWire 0.3: 7.5 MB of its own memory after instead of 14.3 MB). Once,
    /// at the start of the process. Returns whether glibc took it.
    @discardableResult
    public static func keepLargeBlocksApart() -> Bool {
        mallopt?(-3, 128 * 1024) == 1  // (M_MMAP_THRESHOLD, set: no longer moved by glibc)
    }

    /// The heaps' free pages given back to the system (`malloc_trim`; rare, well under a millisecond).
    static func trim() { _ = mallocTrim?(0) }

    // (Neither is in Swift's Glibc module: looked up once. nil: RTLD_DEFAULT.)
    private static let mallopt: (@convention(c) (Int32, Int32) -> Int32)? = dlsym(nil, "mallopt")
        .map { unsafeBitCast($0, to: (@convention(c) (Int32, Int32) -> Int32).self) }
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = dlsym(nil, "malloc_trim")
        .map { unsafeBitCast($0, to: (@convention(c) (Int) -> Int32).self) }
}

/// When the agent trims its heaps (`Heap.trim`): once a burst is over (nothing waiting in the inbox),
/// after a connection gained or lost (a whole picture of the server freed), and never on the way to a
/// command: `finish` runs after the batch's commands are on the socket.
struct HeapTrimming {
    /// Inputs handled since the last trim that make a burst.
    static let burst = 256

    private var handled = 0

    /// After a batch of `inputs` inputs: whether to trim now. `connection`: the batch gained or lost the
    /// server; `idle`: nothing is waiting in the inbox.
    mutating func after(inputs: Int, connection: Bool, idle: Bool) -> Bool {
        handled += inputs
        guard connection || (handled >= Self.burst && idle) else { return false }
        handled = 0
        return true
    }
}
