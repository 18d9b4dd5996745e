/// The release, in one place: `--version` of both programs and the Debian package (`scripts/package`
/// reads it from `audiosessiond --version`).
public enum Release {
    public static let version = "0.1.0"
}
