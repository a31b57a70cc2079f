"""DR operations as code: status, plan, promote, failback (arrives with a later issue)."""
