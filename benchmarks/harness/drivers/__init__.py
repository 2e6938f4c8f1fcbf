"""Drivers for the peers txmq is compared with. Each module imports its client library lazily-safe:
import a module only when its system is chosen, so a missing client breaks only that system."""
