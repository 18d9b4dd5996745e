// The tower's values (settings, events, effects) are part of the agent's own API.
@_exported public import AgentTower
