"""PySpark audit jobs over segment files and live clusters (arrives with a later issue)."""
