# SPDX-License-Identifier: MIT
"""DDP over xport trains the same model as DDP over Gloo: tests/torch/ddp.py
for N ranks (tcp:// init), under Gloo, xport over its default transports
(shared memory on one host) and xport with XP_TRANSPORTS=tcp, from the same
seeds in float64; every parameter must agree with Gloo's within a relative
1e-9 (the sums of gradients may be added in another order: a difference of
a few units in the last place per step, which SGD carries on; an error in
a sum would show as 1e-3 or more).

    ddp_agree.py N STEPS
"""
import os
import subprocess
import sys
import tempfile

import torch

here = os.path.dirname(os.path.abspath(__file__))


def run(n, steps, backend, out, env_extra):
    env = dict(os.environ, **env_extra)
    rc = subprocess.call([sys.executable, os.path.join(here, "launch.py"), "tcp", str(n),
                          os.path.join(here, "ddp.py"), "train", backend, str(steps), out],
                         env=env)
    if rc != 0:
        sys.exit("ddp_agree: %s %s failed (%d)" % (backend, env_extra, rc))
    return torch.load(out)


def main():
    n, steps = int(sys.argv[1]), int(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        ref = run(n, steps, "gloo", os.path.join(tmp, "gloo.pt"), {})
        init = {k: v for k, v in ref.items()}
        for name, extra in (("xport shm", {}), ("xport tcp", {"XP_TRANSPORTS": "tcp"})):
            got = run(n, steps, "xport", os.path.join(tmp, name.replace(" ", "_") + ".pt"),
                      extra)
            worst = 0.0
            for k, want in init.items():
                d = ((got[k] - want).abs() / want.abs().clamp(min=1e-3)).max().item()
                worst = max(worst, d)
            print("ddp_agree: %s, %d ranks, %d steps: largest relative difference from "
                  "Gloo %.3g" % (name, n, steps, worst))
            if worst > 1e-9:
                sys.exit("ddp_agree: %s differs from Gloo by %.3g" % (name, worst))
        # The training moved the parameters: agreement is not that of two
        # untrained models.
        moved = max((ref[k] - v).abs().max().item()
                    for k, v in model_start().items())
        if moved < 1e-3:
            sys.exit("ddp_agree: the parameters hardly moved (%.3g)" % moved)


def model_start():
    sys.path.insert(0, here)
    import ddp
    return ddp.model().state_dict()


if __name__ == "__main__":
    main()
