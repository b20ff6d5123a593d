# SPDX-License-Identifier: MIT
"""Every operation of the xport backend, checked against values each rank
can compute: run as each rank of a job (tests/torch/launch.py). Exits 0
when every check passed; a failed check raises, naming it."""
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import xport.torch  # noqa: F401  registers "xport"

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.uint8, torch.int32, torch.int64]
checks = 0


def check(what, got, want):
    global checks
    checks += 1
    if not torch.equal(got, want):
        raise AssertionError("rank %d: %s: got %s, want %s"
                             % (dist.get_rank(), what, got.flatten()[:8], want.flatten()[:8]))


def expect_error(what, fn, *needles):
    global checks
    checks += 1
    try:
        fn()
    except RuntimeError as e:
        for n in needles:
            if n not in str(e):
                raise AssertionError("%s: error %r does not say %r" % (what, str(e), n))
        return str(e)
    raise AssertionError("%s: no error" % what)


def reductions(g, me, n):
    import math
    for dt in DTYPES:
        t = torch.full((1000,), me + 1, dtype=dt)
        dist.all_reduce(t, group=g)
        check("all_reduce sum %s" % dt, t, torch.full((1000,), n * (n + 1) // 2, dtype=dt))
        t = torch.full((7,), me + 1, dtype=dt)
        dist.all_reduce(t, op=dist.ReduceOp.PRODUCT, group=g)
        check("all_reduce product %s" % dt, t, torch.full((7,), math.factorial(n), dtype=dt))
        for op, want in ((dist.ReduceOp.MIN, 1), (dist.ReduceOp.MAX, n)):
            t = torch.full((5,), me + 1, dtype=dt)
            dist.all_reduce(t, op=op, group=g)
            check("all_reduce %s %s" % (op, dt), t, torch.full((5,), want, dtype=dt))
        if dt.is_floating_point:
            t = torch.full((33,), me + 1, dtype=dt)
            dist.all_reduce(t, op=dist.ReduceOp.AVG, group=g)
            check("all_reduce avg %s" % dt, t, torch.full((33,), (n + 1) / 2, dtype=dt))
    # bool: a sum is a logical or, a min a logical and
    t = torch.tensor([me == 0, False, True])
    dist.all_reduce(t, group=g)
    check("all_reduce bool sum", t, torch.tensor([True, False, True]))
    t = torch.tensor([me == 0, True])
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=g)
    check("all_reduce bool min", t, torch.tensor([n == 1, True]))
    # bitwise operators on integers
    bits = [1 << r for r in range(n)]
    for op, want in ((dist.ReduceOp.BOR, sum(bits)), (dist.ReduceOp.BAND, 0 if n > 1 else 1),
                     (dist.ReduceOp.BXOR, sum(bits))):
        t = torch.full((3,), bits[me], dtype=torch.int32)
        dist.all_reduce(t, op=op, group=g)
        check("all_reduce %s" % op, t, torch.full((3,), want, dtype=torch.int32))
    # complex sums, a large float32 sum, and a non-contiguous tensor
    t = torch.full((4,), complex(me, 1), dtype=torch.complex64)
    dist.all_reduce(t, group=g)
    check("all_reduce complex", t, torch.full((4,), complex(n * (n - 1) / 2, n),
                                               dtype=torch.complex64))
    t = torch.arange(1 << 20, dtype=torch.float32) * (me + 1)
    dist.all_reduce(t, group=g)
    check("all_reduce 4 MiB", t, torch.arange(1 << 20, dtype=torch.float32) * (n * (n + 1) // 2))
    base = torch.arange(12, dtype=torch.float64).reshape(3, 4) * (me + 1)
    view = base.t()  # not contiguous
    dist.all_reduce(view, group=g)
    check("all_reduce non-contiguous", base,
          torch.arange(12, dtype=torch.float64).reshape(3, 4) * (n * (n + 1) // 2))
    ts = [torch.full((3,), me + 1.0), torch.full((2,), 2.0 * (me + 1))]
    dist.all_reduce_coalesced(ts, group=g)
    check("all_reduce_coalesced 0", ts[0], torch.full((3,), n * (n + 1) / 2))
    check("all_reduce_coalesced 1", ts[1], torch.full((2,), n * (n + 1.0)))
    # reduce to the last rank
    root = dist.get_global_rank(g, n - 1) if g is not None else n - 1
    for dt in (torch.float32, torch.int64, torch.bfloat16):
        t = torch.full((9,), me + 1, dtype=dt)
        dist.reduce(t, root, group=g)
        if me == n - 1:
            check("reduce %s" % dt, t, torch.full((9,), n * (n + 1) // 2, dtype=dt))
    t = torch.full((9,), float(me + 1))
    dist.reduce(t, root, op=dist.ReduceOp.MAX, group=g)
    if me == n - 1:
        check("reduce max", t, torch.full((9,), float(n)))
    # reduce_scatter, list and tensor forms
    ins = [torch.full((5,), float((me + 1) * (j + 1))) for j in range(n)]
    out = torch.empty(5)
    dist.reduce_scatter(out, ins, group=g)
    check("reduce_scatter", out, torch.full((5,), float((me + 1) * n * (n + 1) // 2)))
    flat = torch.cat([torch.full((4,), float(j + me), dtype=torch.float64) for j in range(n)])
    out = torch.empty(4, dtype=torch.float64)
    dist.reduce_scatter_tensor(out, flat, group=g)
    check("reduce_scatter_tensor", out,
          torch.full((4,), float(n * me + n * (n - 1) // 2), dtype=torch.float64))
    for dt in (torch.bfloat16, torch.float16):
        flat = torch.ones(4 * n, dtype=dt)
        out = torch.empty(4, dtype=dt)
        dist.reduce_scatter_tensor(out, flat, op=dist.ReduceOp.AVG, group=g)
        check("reduce_scatter_tensor avg %s" % dt, out, torch.ones(4, dtype=dt))


def movement(g, me, n):
    def grank(r):
        return dist.get_global_rank(g, r) if g is not None else r
    for dt in (torch.bfloat16, torch.int64, torch.uint8):
        t = (torch.arange(300000) % 100).to(dt) if me == 1 % n else torch.zeros(300000, dtype=dt)
        dist.broadcast(t, grank(1 % n), group=g)
        check("broadcast %s" % dt, t, (torch.arange(300000) % 100).to(dt))
    outs = [torch.empty(6, dtype=torch.int32) for _ in range(n)]
    dist.all_gather(outs, torch.full((6,), me, dtype=torch.int32), group=g)
    for r in range(n):
        check("all_gather %d" % r, outs[r], torch.full((6,), r, dtype=torch.int32))
    big = torch.empty(n, 5)  # views of one buffer: gathered in place
    dist.all_gather(list(big.unbind(0)), torch.full((5,), float(me)), group=g)
    check("all_gather adjacent", big, torch.arange(n, dtype=torch.float32)[:, None].expand(n, 5))
    out = torch.empty(3 * n, dtype=torch.float16)
    dist.all_gather_into_tensor(out, torch.full((3,), me, dtype=torch.float16), group=g)
    check("all_gather_into_tensor", out,
          torch.arange(n, dtype=torch.float16).repeat_interleave(3))
    # gather and scatter at the last rank
    root = grank(n - 1)
    outs = [torch.empty(4) for _ in range(n)] if me == n - 1 else None
    dist.gather(torch.full((4,), float(me)), outs, dst=root, group=g)
    if me == n - 1:
        for r in range(n):
            check("gather %d" % r, outs[r], torch.full((4,), float(r)))
    out = torch.empty(3, dtype=torch.int64)
    ins = [torch.full((3,), 10 * r, dtype=torch.int64) for r in range(n)] if me == n - 1 else None
    dist.scatter(out, ins, src=root, group=g)
    check("scatter", out, torch.full((3,), 10 * me, dtype=torch.int64))
    # all-to-all: even, uneven (rank r sends r + j + 1 rows to rank j), lists
    inp = torch.arange(n * 2, dtype=torch.float32) + 100 * me
    out = torch.empty(n * 2)
    dist.all_to_all_single(out, inp, group=g)
    want = torch.cat([torch.arange(2 * me, 2 * me + 2, dtype=torch.float32) + 100 * r
                      for r in range(n)])
    check("all_to_all_single even", out, want)
    in_splits = [me + j + 1 for j in range(n)]
    out_splits = [r + me + 1 for r in range(n)]
    inp = torch.cat([torch.full((s, 2), float(10 * me + j)) for j, s in enumerate(in_splits)])
    out = torch.empty(sum(out_splits), 2)
    dist.all_to_all_single(out, inp, out_splits, in_splits, group=g)
    want = torch.cat([torch.full((s, 2), float(10 * r + me)) for r, s in enumerate(out_splits)])
    check("all_to_all_single uneven", out, want)
    # the same, async, polled (some of its requests complete in a poll,
    # the rest in wait: their statuses, checked at completion, must hold)
    out = torch.empty(sum(out_splits), 2)
    w = dist.all_to_all_single(out, inp, out_splits, in_splits, group=g, async_op=True)
    for _ in range(200):
        if w.is_completed():
            break
    w.wait()
    check("all_to_all_single uneven, polled", out, want)
    ins = [torch.full((j + 1,), me * 10 + j, dtype=torch.int32) for j in range(n)]
    outs = [torch.empty(me + 1, dtype=torch.int32) for _ in range(n)]
    dist.all_to_all(outs, ins, group=g)
    for r in range(n):
        check("all_to_all %d" % r, outs[r], torch.full((me + 1,), r * 10 + me, dtype=torch.int32))
    dist.barrier(group=g)


def point_to_point(me, n):
    nxt, prv = (me + 1) % n, (me - 1) % n
    # tags keep messages apart: sent 7 then 3, received 3 then 7
    reqs = [dist.isend(torch.full((8,), 7.0 + me), nxt, tag=7),
            dist.isend(torch.full((8,), 3.0 + me), nxt, tag=3)]
    a, b = torch.empty(8), torch.empty(8)
    dist.recv(a, prv, tag=3)
    dist.recv(b, prv, tag=7)
    for r in reqs:
        r.wait()
    check("recv tag 3", a, torch.full((8,), 3.0 + prv))
    check("recv tag 7", b, torch.full((8,), 7.0 + prv))
    # any source: rank 0 hears from everyone, and learns who
    if me == 0:
        seen = set()
        for _ in range(n - 1):
            t = torch.empty(2, dtype=torch.int64)
            src = dist.recv(t, tag=11)
            check("recv any source from %d" % src, t, torch.full((2,), src, dtype=torch.int64))
            seen.add(src)
        assert seen == set(range(1, n)), seen
    else:
        dist.send(torch.full((2,), me, dtype=torch.int64), 0, tag=11)
    # a large message (rendezvous), into a non-contiguous tensor
    if n > 1:
        if me == 0:
            dist.send(torch.arange(1 << 20, dtype=torch.float64), 1, tag=5)
        elif me == 1:
            t = torch.empty(1 << 10, 1 << 10, dtype=torch.float64).t()
            dist.recv(t, 0, tag=5)
            # the message fills the view in its logical (row-major) order
            check("recv 8 MiB non-contiguous", t.contiguous().view(-1),
                  torch.arange(1 << 20, dtype=torch.float64))


def refusals(me, n):
    # (a device tensor cannot be made here: this torch has no CUDA, and a
    # meta tensor never reaches a backend: torch's dispatcher refuses it)
    expect_error("bool average", lambda: dist.all_reduce(torch.zeros(2, dtype=torch.bool),
                                                          op=dist.ReduceOp.AVG),
                 "cannot be averaged")
    expect_error("int16 sum", lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int16)),
                 "cannot be reduced")
    # a receive nobody answers fails at its deadline, naming rank, tag and call
    if me == 0:
        w = dist.irecv(torch.empty(1), src=n - 1, tag=99)
        msg = expect_error("recv timeout", lambda: w.wait(timedelta(milliseconds=200)),
                           "xport", "recv")
        assert "tag 0x63" in msg and "rank %d" % (n - 1) in msg and " Timed out waiting for it: " in msg, msg
    dist.barrier()


def main():
    n = int(os.environ["WORLD_SIZE"])
    me = int(os.environ["RANK"])
    init = os.environ["XPT_INIT"]
    if init == "env://":
        dist.init_process_group("xport")
    else:
        dist.init_process_group("xport", init_method=init, rank=me, world_size=n)
    assert dist.get_backend() == "xport", dist.get_backend()
    assert dist.get_world_size() == n and dist.get_rank() == me
    reductions(None, me, n)
    movement(None, me, n)
    point_to_point(me, n)
    refusals(me, n)
    # sub-groups: made by their members only (others skip the backend);
    # the odd ranks (or rank 0 alone), and every rank again (a communicator
    # of its own beside the world's; torch sorts a group's ranks)
    odd = [r for r in range(n) if r % 2 == 1] or [0]
    g_odd = dist.new_group(odd, backend="xport")
    g_all = dist.new_group(list(reversed(range(n))), backend="xport")
    if me in odd:
        gme, gn = dist.get_rank(g_odd), len(odd)
        assert gme == odd.index(me)
        reductions(g_odd, gme, gn)
        movement(g_odd, gme, gn)
    assert dist.get_rank(g_all) == me
    reductions(g_all, me, n)
    movement(g_all, me, n)
    dist.barrier()
    print("rank %d: %d checks passed (%s, %d ranks)" % (me, checks, init.split(":")[0], n))
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
