"""The host: inventory, tuning audit and the telemetry sampler."""
