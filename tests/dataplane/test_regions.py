"""The seals hold from the agent's side: it can write its request region, nothing else.

The descriptors cross a real Unix socket (SCM_RIGHTS), as they do between the evaluator
and an agent; what the receiving side then tries is what a hostile agent could.
"""

from __future__ import annotations

import mmap
import os
import socket

import pytest

from ale_robotics.dataplane.layout import Layout
from ale_robotics.dataplane.regions import map_region, new_region, seals_supported

pytestmark = pytest.mark.skipif(not seals_supported(), reason="kernel without F_SEAL_FUTURE_WRITE")


def _handed_over(fd: int) -> int:
    """``fd`` as another process would receive it: passed over a Unix socket pair."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, b:
        socket.send_fds(a, [b"x"], [fd])
        _, fds, _, _ = socket.recv_fds(b, 16, 1)
    return fds[0]


def test_the_response_region_cannot_be_written_by_its_receiver() -> None:
    region = new_region("t-resp", 8192, peer_writable=False)
    try:
        region.map[:5] = b"evalr"  # the evaluator's own mapping still writes
        fd = _handed_over(region.fd)
        try:
            with pytest.raises(PermissionError):
                mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            with pytest.raises(PermissionError):
                os.pwrite(fd, b"agent", 0)
            reopened = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
            try:
                with pytest.raises(PermissionError):
                    mmap.mmap(reopened, 8192)
            finally:
                os.close(reopened)
            for size in (0, 4096, 1 << 20):  # shrinking would SIGBUS the evaluator
                with pytest.raises(PermissionError):
                    os.ftruncate(fd, size)
            seen = map_region(os.dup(fd), writable=False)
            assert bytes(seen.map[:5]) == b"evalr"
            seen.close()
        finally:
            os.close(fd)
    finally:
        region.close()


def test_the_request_region_is_writable_but_keeps_its_size() -> None:
    region = new_region("t-req", 4096, peer_writable=True)
    try:
        fd = _handed_over(region.fd)
        agent = map_region(fd, writable=True)
        agent.map[:4] = b"act!"
        assert bytes(region.map[:4]) == b"act!"  # the evaluator reads what the agent wrote
        with pytest.raises(PermissionError):
            os.ftruncate(agent.fd, 0)
        with pytest.raises(PermissionError):
            os.ftruncate(agent.fd, 8192)
        agent.close()
    finally:
        region.close()


def test_the_evaluator_maps_the_request_region_read_only() -> None:
    region = new_region("t-req", 4096, peer_writable=True)
    try:
        with pytest.raises(TypeError):
            region.map[0] = 1
    finally:
        region.close()


def test_layout_round_trips_and_refuses_another_version() -> None:
    import numpy as np

    lay = Layout.build(64, (11,), np.dtype("f8"), (3,), np.dtype("f4"), 1 << 20)
    assert Layout.from_json(lay.to_json()) == lay
    assert lay.action_offset % 8 == 0 and lay.seeds_offset % 8 == 0
    assert lay.reward_offset % 8 == 0 and lay.info_offset % 64 == 0
    assert lay.request_bytes % 4096 == 0 and lay.response_bytes == 1 << 20
    assert lay.info_capacity == (1 << 20) - lay.info_offset
    with pytest.raises(ValueError, match="version"):
        Layout.from_json(lay.to_json().replace('"version": 1', '"version": 99'))
