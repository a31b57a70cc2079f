"""Running an audit job from a test: ``strait audit JOB ARGS`` in this process (on the session's
SparkSession), or ``python -m spark_jobs.jobs.JOB ARGS`` as its own process, as an operator runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from strait.cli import main

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 240


def audit(job: str, *args: str, own_process: bool = False) -> tuple[int, str, dict[str, Any] | None]:
    """(exit status, output, summary.json of ``--out`` or None)."""
    if own_process:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        argv = [sys.executable, "-m", f"spark_jobs.jobs.{job}", "--master", "local[2]", *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, env=env, check=False)
        code, output = done.returncode, done.stdout + done.stderr
    else:
        result = CliRunner().invoke(main, ["audit", job, *args])
        code, output = result.exit_code, result.output
    out = Path(args[args.index("--out") + 1]) if "--out" in args else None
    summary = json.loads((out / "summary.json").read_text()) if out and (out / "summary.json").exists() else None
    return code, output, summary
