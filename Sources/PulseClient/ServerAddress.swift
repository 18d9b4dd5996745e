import CLibPulse

extension PulseClient {
    /// The address of the server this client is connected to, as libpulse resolved it (its default
    /// server, `PULSE_SERVER` or the configured one: `unix:/run/user/1000/pulse/native`,
    /// `tcp:host:4713`); nil while not connected. What names the server for agents that must agree on it
    /// however each was told where it is.
    public var connectedAddress: String? {
        connection.withContext { context in
            guard let context, let address = pa_context_get_server(context) else { return nil }
            return String(cString: address)
        }
    }
}
