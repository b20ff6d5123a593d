# SPDX-License-Identifier: MIT
"""One worker of a torchrun job (tests/launchers/run.sh): the xport
PyTorch backend forms the group from torchrun's env:// (its store), then
an allreduce of the ranks must give 0 + 1 + ... + (size - 1), and the
size must be argv[1]. Prints "torch_check: rank R of N ok"."""
import sys

import torch
import torch.distributed as dist

import xport.torch  # noqa: F401  registers "xport"

want = int(sys.argv[1])
dist.init_process_group("xport", init_method="env://")
me, n = dist.get_rank(), dist.get_world_size()
t = torch.tensor([me], dtype=torch.int64)
dist.all_reduce(t)
if n != want or t.item() != n * (n - 1) // 2:
    sys.exit("torch_check: rank %d: a job of %d (expected %d), sum %d" % (me, n, want, t.item()))
print("torch_check: rank %d of %d ok" % (me, n), flush=True)
dist.destroy_process_group()
