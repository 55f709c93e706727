#!/usr/bin/env python3
"""Builds of the peer app against each other, launch by launch: each thread's own CPU in an idle
launch, or how long start held its caller. For a change whose effect (tens of microseconds on
one thread) is below the whole-process CPU figure's run-to-run drift (about 0.3 ms here).

    python3 scripts/thread-cpu-ab.py [--rounds N] [--init] APP [APP ...]

APP: a peer-app binary (`swift build -c release --product peer-app`, copied aside per build),
optionally followed by " @PART" (linked, nohang: the peer app's parts), e.g. "/tmp/a @nohang".
Each round launches every APP once, in a shuffled order, each in a reports directory of its own
that earlier rounds left (a later launch, as apps start). Idle mode (the default): `APP idle DIR
0`, and 85 ms after the launch, before the app's exit at 100 ms, each thread's run time from
/proc/PID/task/TID/schedstat, by thread name (the main thread as "main"). --init: `APP init DIR
0`, whose own figure is how long `Aftermath.start` held the calling thread. Prints medians and
quartiles per APP and thread.
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict


def launch_args(app, mode, directory):
    binary, _, part = app.partition(" @")
    return [binary, mode, directory, "0"] + ([part] if part else [])


def idle_threads(app, directory):
    """Each thread's CPU (µs) 85 ms into an idle launch of app, by name."""
    process = subprocess.Popen(launch_args(app, "idle", directory), stdout=subprocess.DEVNULL)
    time.sleep(0.085)
    threads = {}
    try:
        for tid in os.listdir(f"/proc/{process.pid}/task"):
            try:
                with open(f"/proc/{process.pid}/task/{tid}/comm") as f:
                    name = f.read().strip()
                with open(f"/proc/{process.pid}/task/{tid}/schedstat") as f:
                    ns = int(f.read().split()[0])
            except OSError:
                continue  # ended meanwhile
            name = "main" if int(tid) == process.pid else name
            threads[name] = threads.get(name, 0) + ns / 1000
    finally:
        process.wait()
    threads["(all threads)"] = sum(threads.values())
    return threads


def init_hold(app, directory):
    """How long start held its caller (µs), as the peer app prints it."""
    out = subprocess.run(launch_args(app, "init", directory), capture_output=True, text=True).stdout
    return {"start on the caller": int(out.split("init_ns=")[1].split()[0]) / 1000}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--init", action="store_true", help="start's hold on its caller instead")
    parser.add_argument("apps", nargs="+")
    options = parser.parse_args()
    measure = init_hold if options.init else idle_threads
    root = tempfile.mkdtemp(prefix="aftermath-ab-")
    directories = [os.path.join(root, str(i)) for i in range(len(options.apps))]
    for app, directory in zip(options.apps, directories):
        os.makedirs(directory)
        measure(app, directory)  # the first launch: leaves what a later launch finds
    samples = [defaultdict(list) for _ in options.apps]
    for _ in range(options.rounds):
        order = list(range(len(options.apps)))
        random.shuffle(order)
        for i in order:
            for name, us in measure(options.apps[i], directories[i]).items():
                samples[i][name].append(us)
    subprocess.run(["rm", "-rf", root])
    print(f"{options.rounds} shuffled rounds; µs: median (first quartile, third quartile), launches")
    for app, by_name in zip(options.apps, samples):
        print(app)
        for name in sorted(by_name):
            values = sorted(by_name[name])
            q = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
            print(f"  {name:22} {statistics.median(values):9.1f} ({q[0]:.1f}, {q[2]:.1f}) n={len(values)}")


if __name__ == "__main__":
    sys.exit(main())
