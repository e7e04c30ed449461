"""Free TCP ports on this machine, for jobs whose processes meet on 127.0.0.1
(a torchrun rendezvous, TensorFlow's TF_CONFIG cluster)."""

from __future__ import annotations

import socket


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct free TCP ports on ``host``, found by binding to port 0.

    All sockets stay open until every port is picked, so the ports differ; a
    port can still be taken by someone else between this call and its use.
    """
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
