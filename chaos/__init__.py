"""Fault injection and verification suite (arrives with a later issue)."""
