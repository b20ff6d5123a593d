# SPDX-License-Identifier: MIT
"""A DistributedDataParallel training of a small model, as each rank of a
job (tests/torch/launch.py):

    ddp.py train BACKEND STEPS OUT   trains in float64 from fixed seeds (each
                                     rank its own data); rank 0 saves the
                                     parameters to OUT
    ddp.py kill BACKEND STEP         trains until STEP, where the last rank
                                     kills itself (SIGKILL); every other rank
                                     must see its next collective raise,
                                     within 20 s (the group's timeout is
                                     120 s), naming that rank
"""
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import xport.torch  # noqa: F401


def model():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 4)).double()


def batches(rank, steps):
    g = torch.Generator().manual_seed(99 + rank)
    for _ in range(steps):
        x = torch.randn(16, 32, generator=g, dtype=torch.float64)
        yield x, torch.sin(x[:, :4]) + x[:, 4:8] ** 2


def init(backend, timeout):
    me, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    init_method = os.environ["XPT_INIT"]
    if init_method == "env://":
        dist.init_process_group(backend, timeout=timeout)
    else:
        dist.init_process_group(backend, init_method=init_method, rank=me, world_size=n,
                                timeout=timeout)
    return me, n


def train(backend, steps, out):
    me, n = init(backend, timedelta(seconds=120))
    net = DDP(model(), bucket_cap_mb=0.01)  # several buckets: overlapping allreduces
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for x, y in batches(me, steps):
        opt.zero_grad()
        nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    if me == 0:
        torch.save({k: v.clone() for k, v in net.module.state_dict().items()}, out)
    dist.barrier()
    dist.destroy_process_group()


def kill(backend, at):
    me, n = init(backend, timedelta(seconds=120))
    net = DDP(model(), bucket_cap_mb=0.01)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    victim = n - 1
    for step, (x, y) in enumerate(batches(me, 10 ** 6)):
        if step == at and me == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        started = time.monotonic()
        try:
            opt.zero_grad()
            nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        except RuntimeError as e:
            took = time.monotonic() - started
            text = str(e)
            assert step >= at, "rank %d failed at step %d, before the kill: %s" % (me, step, e)
            assert took < 20, "rank %d: the failure took %.1f s" % (me, took)
            assert "rank %d" % victim in text, "rank %d: %r does not name rank %d" % (
                me, text, victim)
            print("rank %d: step %d raised after %.2f s: %s" % (me, step, took, text[:300]))
            sys.stdout.flush()
            # The job is broken: leave without the collective shutdown,
            # once the other survivors have seen the failure too (else
            # they could see this rank go first, and name it).
            time.sleep(5)
            os._exit(0)
        assert step < at + 50, "rank %d: no failure 50 steps after the kill" % me
    return 1


if __name__ == "__main__":
    what, backend = sys.argv[1], sys.argv[2]
    if what == "train":
        train(backend, int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(kill(backend, int(sys.argv[3])))
