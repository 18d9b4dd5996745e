/// The values PulseClient fills and sends are ServerModel's: whoever imports PulseClient has them.
@_exported public import ServerModel
