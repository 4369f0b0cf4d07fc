"""Runs a command and reports the peak memory of its whole process tree.

usage: peak_rss.py REPORT_JSON CMD [ARG]...

/usr/bin/time's "maximum resident set size" is one process's (the largest waited-for child's),
which misses a JVM that pyspark starts and never waits for. This samples every 0.1 s the
peak resident set (VmHWM) of each process descended from CMD and reports the sum of those
peaks (an upper bound of the tree's simultaneous peak; for a single process its exact peak),
the wall time, and the exit code to REPORT_JSON. CMD's stdout and stderr pass through; the exit
code is CMD's.
"""
import json
import os
import subprocess
import sys
import time


def children():
    """pid -> parent pid of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(d)] = int(fields[1])
        except OSError:
            continue
    return out


def tree(root):
    parents = children()
    found, todo = {root}, [root]
    while todo:
        p = todo.pop()
        for c, pp in parents.items():
            if pp == p and c not in found:
                found.add(c)
                todo.append(c)
    return found


def hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> int:
    report, cmd = sys.argv[1], sys.argv[2:]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd)
    peaks = {}
    while p.poll() is None:
        for pid in tree(p.pid):
            kb = hwm_kb(pid)
            if kb > peaks.get(pid, 0):
                peaks[pid] = kb
        time.sleep(0.1)
    wall = time.perf_counter() - t0
    with open(report, "w") as f:
        json.dump({"wall_seconds": wall, "peak_rss_kb": sum(peaks.values()),
                   "processes": len(peaks), "exit_code": p.returncode}, f)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
