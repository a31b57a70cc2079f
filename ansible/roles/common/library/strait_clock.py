#!/usr/bin/python
"""Ansible module: ask the kernel whether the system clock is synchronised (read-only).

The kernel keeps the NTP discipline state that chrony, ntpd and systemd-timesyncd update:
``adjtimex(2)`` with ``modes = 0`` reads it without changing anything (no privilege needed). The
clock counts as synchronised when the STA_UNSYNC status bit is clear, which is what
``timedatectl`` reports as "System clock synchronized" -- but this works without systemd too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: strait_clock
short_description: Whether the kernel says the system clock is synchronised
description:
  - Reads the kernel's clock discipline state with adjtimex(2) (modes 0: read only).
  - Never changes anything.
options: {}
author: strait
"""

RETURN = r"""
synchronised:
  description: True when the STA_UNSYNC status bit is clear (a time daemon disciplines the clock).
  type: bool
  returned: always
state:
  description: The clock state adjtimex returns (TIME_OK, TIME_INS, TIME_DEL, TIME_OOP, TIME_WAIT, TIME_ERROR).
  type: str
  returned: always
maxerror_us:
  description: The kernel's maximum error estimate, in microseconds.
  type: int
  returned: always
"""

STA_UNSYNC = 0x0040
_STATES = {0: "TIME_OK", 1: "TIME_INS", 2: "TIME_DEL", 3: "TIME_OOP", 4: "TIME_WAIT", 5: "TIME_ERROR"}
# struct timex on 64-bit Linux starts: int modes (padded to 8), long offset, long freq,
# long maxerror, long esterror, int status. The whole struct is 208 bytes; 512 leaves room.
_HEAD = struct.Struct("=i4xqqqqi")
_TIMEX_BYTES = 512


def read_clock() -> dict[str, object]:
    """The kernel's clock discipline state; OSError when adjtimex fails."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    buffer = ctypes.create_string_buffer(_TIMEX_BYTES)  # zeroed: modes 0 reads only
    state = libc.adjtimex(buffer)
    if state < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    _modes, _offset, _freq, maxerror, _esterror, status = _HEAD.unpack_from(buffer.raw)
    return {
        "synchronised": not status & STA_UNSYNC,
        "state": _STATES.get(state, str(state)),
        "maxerror_us": maxerror,
    }


def main() -> None:
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    try:
        clock = read_clock()
    except OSError as exc:
        module.fail_json(msg=f"adjtimex failed: {exc}")
    module.exit_json(changed=False, **clock)


if __name__ == "__main__":
    main()
