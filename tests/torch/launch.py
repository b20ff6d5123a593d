# SPDX-License-Identifier: MIT
"""Starts N processes of a worker script as a PyTorch job, the way users do:

    launch.py torchrun N WORKER [ARGS...]   torchrun --standalone (env://,
                                            its TCPStore)
    launch.py tcp N WORKER [ARGS...]        N processes, init_method
                                            tcp://127.0.0.1:PORT
    launch.py file N WORKER [ARGS...]       N processes, init_method
                                            file:///tmp/...

The worker gets XPT_INIT (the init method, "env://" under torchrun),
RANK and WORLD_SIZE. Exit status: the first failing worker's, else 0.
With XPT_EXPECT_KILLED=R (tcp and file), rank R must end by SIGKILL.
Run with the Python that has torch (Debian's /usr/bin/python3) and
PYTHONPATH naming the build's python directory.
"""
import os
import socket
import subprocess
import sys
import tempfile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    mode, n, worker, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    env = dict(os.environ)
    if mode == "torchrun":
        env["XPT_INIT"] = "env://"
        # --redirects/--tee: Debian's torch 1.13 under Python 3.11 fails
        # on their default "0" (its Std.from_str finds no flag of value 0:
        # 3.11 no longer iterates it); 1 keeps stdout on the console.
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--redirects", "1", "--tee", "1",
               "--nproc_per_node", str(n), worker] + args
        return subprocess.call(cmd, env=env)
    tmp = None
    if mode == "tcp":
        env["XPT_INIT"] = "tcp://127.0.0.1:%d" % free_port()
    elif mode == "file":
        tmp = tempfile.mkdtemp(prefix="xpt-")
        env["XPT_INIT"] = "file://" + os.path.join(tmp, "store")
    else:
        sys.exit("launch.py: mode %r is not torchrun, tcp or file" % mode)
    procs = []
    for r in range(n):
        e = dict(env, RANK=str(r), WORLD_SIZE=str(n))
        procs.append(subprocess.Popen([sys.executable, worker] + args, env=e))
    rcs = [p.wait() for p in procs]
    if tmp:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    killed = int(os.environ.get("XPT_EXPECT_KILLED", "-1"))
    if killed >= 0:
        if rcs[killed] != -9:
            print("launch.py: rank %d was to die by SIGKILL, it ended with %d"
                  % (killed, rcs[killed]), file=sys.stderr)
            return 1
        rcs[killed] = 0
    bad = [rc for rc in rcs if rc != 0]
    return bad[0] if bad else 0


if __name__ == "__main__":
    sys.exit(main())
