"""The cross-site mirror service (arrives with a later issue)."""
