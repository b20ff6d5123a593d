# SPDX-License-Identifier: MIT
"""xport as a torch.distributed backend.

    import xport.torch
    torch.distributed.init_process_group("xport", ...)

Importing this module registers the backend "xport" with
torch.distributed.Backend.register_backend. Every init method works
(torchrun's env://, tcp://, file://): the job forms over the store torch
gives the backend (rank 0 publishes an xp_unique_id, which carries the job
key, and every rank joins with it), so no XP_* variable is needed. Groups
made later with new_group(...) are communicators of the same job.

At exit the job is finalized (collective over the job's ranks: each waits
for the others, at most the group's timeout, so sends that completed are
delivered); shutdown() does it earlier. A process that ends on an uncaught
exception does not wait for the others: it leaves at once, and they fail
naming it, as when it dies.
"""
import atexit
import sys
from datetime import timedelta

import torch.distributed as _dist

from . import _xport_torch

ProcessGroupXport = _xport_torch.ProcessGroupXport
BACKEND = "xport"


def _create(opts, pg_options=None):
    timeout = opts.timeout
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout))
    return ProcessGroupXport(opts.store, opts.group_rank, opts.group_size, timeout,
                             str(opts.group_id), list(opts.global_ranks_in_group))


def shutdown():
    """Finalizes this process's xport job; no xport group may be used after."""
    _xport_torch.shutdown()


_uncaught = False


def _note_uncaught(kind, value, tb, _previous=sys.excepthook):
    global _uncaught
    _uncaught = True
    _previous(kind, value, tb)


def _at_exit():
    # Finalizing waits for every rank; one that failed must not make the
    # others (blocked in a collective with it) wait out their timeout.
    if not _uncaught:
        shutdown()


if "XPORT" not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, _create, extended_api=True)
    sys.excepthook = _note_uncaught
    atexit.register(_at_exit)
