"""The replicas' 127.0.0.1 ports: chosen free before the cluster spec is written, probed while
the supervisor waits for every TensorFlow server to come up."""

from __future__ import annotations

import socket

from vtrain.errors import BackendError
from vtrain.local.env import HOST


def free_ports(n: int) -> list[int]:
    """n distinct free ports on 127.0.0.1 (all held open together, so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    except OSError as err:
        raise BackendError(f"cannot open {n} ports on {HOST} for the replicas ({err.strerror or err}); "
                           "run fewer with --max-replicas") from None
    finally:
        for s in socks:
            s.close()


def listening(port: int) -> bool:
    """Whether something accepts connections on the port (a replica's server is up)."""
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


__all__ = ["free_ports", "listening"]
