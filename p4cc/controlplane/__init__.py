"""Control plane: per-switch P4Runtime/Thrift clients, telemetry, agents."""
