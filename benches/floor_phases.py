"""Where a one-call request's latency goes, triage beside the bare proxy: the load bench's floor
phase runs one kind while `perf record` takes syscall tracepoints (recvfrom, writev) of both
servers from the start of triage's concurrency-1 window, and each server's window is cut out of
its trace by time. At concurrency 1 a server's syscalls form one cycle per request, which
splits its time into:
  pre      the request read -> the LLM request's write begins  (the server's own work)
  llm      that write begins -> the LLM's answer is read         (loopback, wake-ups, the fake)
  post     the answer read -> the response's first write begins (the server's own work)
  serve    the request read -> the response's first write begins
Tracepoints cost about a microsecond each, so compare the columns, not the sums with the
bench's own latency. Needs perf (Debian's linux-perf) with tracefs, and root or
perf_event_paranoid <= 1 for other processes' tracepoints.
Usage: python3 benches/floor_phases.py <load bench binary> <triage binary> [json|sse]"""
import os, re, shutil, signal, subprocess, sys, tempfile, time

EVENTS = "syscalls:sys_enter_recvfrom,syscalls:sys_exit_recvfrom,syscalls:sys_enter_writev"
# The one-call kinds: a two-call request does not fit the cycle below.
KINDS = ("json", "sse")


def child_pid(parent, pattern):
    """The bench's own child matching: not a leftover of an earlier run, nor a process the
    server forked (its sandbox helper keeps the server's command line)."""
    found = subprocess.run(["pgrep", "-o", "-P", str(parent), "-f", pattern],
                           capture_output=True, text=True)
    return found.stdout.strip() or None


def events(data):
    """(time, 'r' | 'w', fd, bytes read) for reads that returned data and writes, in time order."""
    script = subprocess.run(["perf", "script", "-i", data, "-F", "tid,time,event,trace"],
                            capture_output=True, text=True)
    if script.returncode != 0:
        sys.exit("perf script %s: %s" % (data, script.stderr.strip()))
    out, reading = [], {}
    for line in script.stdout.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+):\s+syscalls:sys_(\w+):\s*(.*)", line)
        if not m:
            continue
        tid, t, name, rest = m[1], float(m[2]), m[3], m[4]
        fd = re.search(r"fd: (0x[0-9a-f]+)", rest)
        if name == "enter_recvfrom" and fd:
            reading[tid] = int(fd[1], 16)
        elif name == "exit_recvfrom" and tid in reading:
            size = int(rest.split()[0], 16)
            # 0 is the peer closing; a negative errno reads as a huge unsigned value.
            if 0 < size < 1 << 62:
                out.append((t, "r", reading[tid], size))
        elif name == "enter_writev" and fd:
            out.append((t, "w", int(fd[1], 16), 0))
    return out


def requests(evs):
    """The one-call requests in a concurrency-1 trace. The client's and the LLM's connections
    are the two busiest descriptors; the client's is the one read in smaller pieces (the
    bench's asks are about 200 bytes, the LLM's answers kilobytes). The syscall pattern alone
    cannot tell them apart: read LLM, write client, read client, write LLM fits it as well."""
    sizes = {}
    for _, kind, fd, size in evs:
        if kind == "r":
            sizes.setdefault(fd, []).append(size)
    busiest = sorted(sizes, key=lambda fd: len(sizes[fd]), reverse=True)[:2]
    if len(busiest) < 2:
        return []
    median = {fd: sorted(sizes[fd])[len(sizes[fd]) // 2] for fd in busiest}
    client, llm = sorted(busiest, key=median.get)
    return requests_between(evs, client, llm)


def requests_between(evs, client, llm):
    """A read on the client's connection opens a request (its body may take more reads); the
    first write to the LLM's is the call, reads there its answer, the first write to the client
    after them the response. A second write to the LLM after an answer is a second call: that
    request is left out. A request whose response never shows is left out with the rest of its
    reads, so one lost event cannot merge two requests."""
    done, current = [], None
    for t, kind, fd, _ in evs:
        if kind == "r" and fd == client:
            if current is None or "response" in current or "answer" in current:
                if current and "response" in current and current["calls"] == 1:
                    done.append(current)
                current = {"request": t, "calls": 0}
        elif current is None or "response" in current:
            continue
        elif kind == "w" and fd == llm:
            # Writes before an answer are the first call's (its head and body may be apart).
            if current["calls"] == 0:
                current["call"] = t
                current["calls"] = 1
            elif "answer" in current:
                current["calls"] += 1
        elif kind == "r" and fd == llm and current["calls"]:
            current["answer"] = t
        elif kind == "w" and fd == client and "answer" in current:
            current["response"] = t
    if current and "response" in current and current["calls"] == 1:
        done.append(current)
    return done


def p50_us(values):
    v = sorted(values)
    return v[len(v) // 2] * 1e6 if v else float("nan")


def run_bench(bench, triage, kind, tmp):
    """Runs the floor for `kind` with both servers recorded; returns each server's
    concurrency-1 window, in perf's clock, from the bench's progress lines."""
    env = dict(os.environ, LOAD_BENCH_FLOOR_KINDS=kind, LOAD_BENCH_BIN=triage)
    env.pop("LOAD_BENCH_WRAP", None)
    log_path = os.path.join(tmp, "bench.log")
    log = open(log_path, "w+")
    bench_run = subprocess.Popen([bench, "--only", "floor", "--quick", "--json",
                                  os.path.join(tmp, "floor.json")], env=env, stdout=log, stderr=log)
    recorders, marks = {}, {}
    markers = {"triage at concurrency 1": "triage", "proxy at concurrency 1": "proxy",
               "at concurrency 64": "end"}
    try:
        while bench_run.poll() is None:
            time.sleep(0.05)
            log.seek(0)
            text = log.read()
            for marker, name in markers.items():
                if name not in marks and marker in text:
                    marks[name] = time.clock_gettime(time.CLOCK_MONOTONIC)
            # Both servers are up and serving by triage's window. perf attaches to the threads
            # a process has then: attached at start, it would miss the serving threads.
            if "triage" in marks and not recorders:
                for name, pattern in (("triage", "^%s serve" % re.escape(triage)),
                                      ("proxy", "serve-proxy")):
                    pid = child_pid(bench_run.pid, pattern)
                    if pid is None:
                        sys.exit("no %s process found under the bench" % name)
                    # -B: no build-id pass at the end, which would run in a measured window.
                    recorders[name] = subprocess.Popen(
                        ["perf", "record", "-q", "-B", "-k", "CLOCK_MONOTONIC", "-e", EVENTS,
                         "-p", pid, "-o", os.path.join(tmp, name + ".data")],
                        stdout=subprocess.DEVNULL,
                        stderr=open(os.path.join(tmp, name + ".perf.log"), "w"))
    finally:
        if bench_run.poll() is None:
            bench_run.kill()
        for recorder in recorders.values():
            recorder.send_signal(signal.SIGINT)
            recorder.wait()
    if bench_run.returncode != 0 or not {"triage", "proxy", "end"} <= marks.keys():
        sys.exit("the bench did not run the floor's windows; see %s" % log_path)
    return {"triage": (marks["triage"], marks["proxy"]), "proxy": (marks["proxy"], marks["end"])}


def main():
    if len(sys.argv) < 3 or shutil.which("perf") is None:
        sys.exit(__doc__ if len(sys.argv) < 3 else "perf not found (Debian's linux-perf)")
    bench, triage = sys.argv[1], os.path.abspath(sys.argv[2])
    kind = sys.argv[3] if len(sys.argv) > 3 else "json"
    if kind not in KINDS:
        sys.exit("kind: one of %s (one LLM call per request)" % ", ".join(KINDS))
    tmp = tempfile.mkdtemp(prefix="floor-phases-")
    windows = run_bench(bench, triage, kind, tmp)
    print("%-7s %8s %8s %8s %8s %8s" % ("server", "requests", "pre", "llm", "post", "serve"))
    for name, (start, end) in windows.items():
        data = os.path.join(tmp, name + ".data")
        if not os.path.exists(data):
            sys.exit("no trace of %s; see %s" % (name, os.path.join(tmp, name + ".perf.log")))
        found = requests([e for e in events(data) if start <= e[0] <= end])
        print("%-7s %8d %8.1f %8.1f %8.1f %8.1f" % (
            name, len(found),
            p50_us([r["call"] - r["request"] for r in found]),
            p50_us([r["answer"] - r["call"] for r in found]),
            p50_us([r["response"] - r["answer"] for r in found]),
            p50_us([r["response"] - r["request"] for r in found])))
    print("(p50, µs; traces and the bench's log in %s)" % tmp)


if __name__ == "__main__":
    main()
