"""The bundle an OCI runtime (runc, crun) runs a replica's container from: its ``config.json``, the way Vertex
runs the image, in one pure function (:func:`runtime_spec`): the image's rootfs, host networking (no network
namespace: TF_CONFIG's 127.0.0.1 ports work as they are), its own PID, IPC and mount namespaces, Docker's
default capabilities, no new privileges, the standard file systems, then the replica's binds;
:mod:`vtrain.local.containers` starts it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Docker's default capability set: what a process in a Vertex container may do.
CAPABILITIES = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
                "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
                "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]
_MASKED = ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
           "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"]
_READONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]


def runtime_spec(*, rootfs: Path, args: Sequence[str], env: Mapping[str, str], cwd: str,
                 mounts: Sequence[tuple[str, str, bool]], rootless: bool, user: tuple[int, int] = (0, 0),
                 readonly: bool = True) -> dict[str, Any]:
    """An OCI runtime config: `args` in `rootfs` with host networking and its own PID namespace; `mounts`
    are (host path, container path, writable) binds, after the standard file systems."""
    namespaces = [{"type": "pid"}, {"type": "ipc"}, {"type": "mount"}]
    standard: list[dict[str, Any]] = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620",
                     *([] if rootless else ["gid=5"])]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=1g"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "none" if rootless else "sysfs", "source": "/sys" if rootless else "sysfs",
         "options": ["rbind", "nosuid", "noexec", "nodev", "ro"] if rootless else ["nosuid", "noexec", "nodev", "ro"]},
    ]
    binds = [{"destination": inside, "type": "bind", "source": host,
              "options": ["rbind", "rw" if writable else "ro", "nosuid", "nodev"]} for host, inside, writable in mounts]
    linux: dict[str, Any] = {"namespaces": namespaces, "maskedPaths": _MASKED, "readonlyPaths": _READONLY}
    if rootless:
        namespaces.append({"type": "user"})
        linux["uidMappings"] = [{"containerID": 0, "hostID": os.geteuid(), "size": 1}]
        linux["gidMappings"] = [{"containerID": 0, "hostID": os.getegid(), "size": 1}]
    caps = list(CAPABILITIES)
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False, "user": {"uid": user[0], "gid": user[1]}, "args": list(args),
            "env": [f"{k}={v}" for k, v in env.items()], "cwd": cwd or "/", "noNewPrivileges": True,
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
        },
        "root": {"path": str(rootfs), "readonly": readonly},
        "mounts": standard + binds,
        "linux": linux,
    }


def host_files() -> list[tuple[str, str, bool]]:
    """The host's name resolution, read-only, as `docker run --network host` gives a container."""
    return [(p, p, False) for p in ("/etc/resolv.conf", "/etc/hosts") if os.path.isfile(p)]


__all__ = ["CAPABILITIES", "host_files", "runtime_spec"]
