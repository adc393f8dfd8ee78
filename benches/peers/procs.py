"""Child processes, deadlines and /proc figures for the side-by-side bench."""

import ctypes
import os
import signal
import subprocess
import time

PR_SET_PDEATHSIG = 1
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Failure(Exception):
    """A comparison could not run; the message says why."""


def _die_with_parent():
    # The kernel kills the child if this process dies without cleaning up (SIGKILL, OOM).
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Children:
    """Every long-running child the bench starts; all are ended when the `with` block ends."""

    def __init__(self):
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.stop_all()

    def spawn(self, args, *, env, cwd, log_path):
        log = open(log_path, "ab")
        proc = subprocess.Popen(args, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        log.close()
        self.procs.append(proc)
        return proc

    def stop(self, proc, grace=5.0):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self):
        for proc in reversed(list(self.procs)):
            self.stop(proc)


def wait_until(what, deadline_s, check, proc=None, interval=0.1):
    """Polls `check()` until it returns a true value (returned); Failure after the deadline, or
    at once if `proc` has exited."""
    end = time.monotonic() + deadline_s
    last_error = None
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise Failure(f"{what}: the process exited with status {proc.returncode}")
        try:
            value = check()
            if value:
                return value
        except (OSError, ValueError, KeyError) as e:  # not up yet
            last_error = e
        time.sleep(interval)
    raise Failure(f"{what}: not within {deadline_s:.0f} s" + (f" (last: {last_error})" if last_error else ""))


def status_kb(pid, field):
    """A `/proc/PID/status` field in KB (`VmRSS`, `VmHWM`)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise Failure(f"no {field} for pid {pid}")


def cpu_seconds(pid):
    """User plus system CPU time of a process so far (`/proc/PID/stat` utime + stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def raise_fd_limit():
    """Each server and simulator holds a socket per device; children inherit the raised limit."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
