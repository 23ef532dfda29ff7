"""Python source that helper scripts run inside namespaces (``python -c``) prepend to read
the kernel's receive timestamp of a datagram or TCP read (SO_TIMESTAMPNS): an arrival time
that a busy VM's late process wake-up does not move."""

KERNEL_STAMP = """
import socket, struct
SO_TIMESTAMPNS = 35  # Linux, <asm-generic/socket.h>; also the cmsg type (SCM_TIMESTAMPNS)
STAMP_SPACE = socket.CMSG_SPACE(16)
def kernel_stamp(ancillary):
    \"\"\"The SO_TIMESTAMPNS stamp (ns since the epoch) among recvmsg's ancillary data.\"\"\"
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", raw[:16])
            return sec * 1_000_000_000 + nsec
    raise SystemExit("the kernel gave no receive timestamp (SO_TIMESTAMPNS)")
"""
