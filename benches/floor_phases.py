"""Where a one-call request's latency goes, triage beside the bare proxy: the load bench's floor
phase runs one kind while `perf record` takes syscall tracepoints (recvfrom, writev,
epoll_wait) of each server during its own concurrency-1 window. At concurrency 1 a server's
syscalls form one cycle per request, which splits its time into:
  pre      the request read -> the LLM request's write begins  (the server's own work)
  llm      that write begins -> the LLM's answer is read         (loopback, wake-ups, the fake)
  post     the answer read -> the response's first write begins (the server's own work)
  serve    the request read -> the response's first write begins
Tracepoints cost about a microsecond each, so compare the columns, not the sums with the
bench's own latency. Needs perf (Debian's linux-perf) with tracefs, and root or
perf_event_paranoid <= 1 for other processes' tracepoints.
Usage: python3 benches/floor_phases.py <load bench binary> <triage binary> [json|sse]"""
import os, re, signal, subprocess, sys, tempfile, time

EVENTS = ",".join("syscalls:sys_%s" % e for e in [
    "enter_recvfrom", "exit_recvfrom", "enter_writev", "enter_epoll_wait", "exit_epoll_wait"])


def record(pid, out):
    return subprocess.Popen(["perf", "record", "-q", "-e", EVENTS, "-p", str(pid), "-o", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(rec):
    if rec is not None:
        rec.send_signal(signal.SIGINT)
        rec.wait()


def events(data):
    """(time, 'r' | 'w', fd, bytes read) for reads that returned data and writes, in time order."""
    text = subprocess.run(["perf", "script", "-i", data, "-F", "tid,time,event,trace"],
                          capture_output=True, text=True).stdout
    out, reading = [], {}
    for line in text.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+):\s+syscalls:sys_(\w+):\s*(.*)", line)
        if not m:
            continue
        tid, t, name, rest = m[1], float(m[2]), m[3], m[4]
        fd = re.search(r"fd: (0x[0-9a-f]+)", rest)
        if name == "enter_recvfrom":
            reading[tid] = int(fd[1], 16)
        elif name == "exit_recvfrom":
            ret = int(rest.split()[0], 16)
            if 0 < ret < 1 << 62 and tid in reading:
                out.append((t, "r", reading[tid], ret))
        elif name == "enter_writev":
            out.append((t, "w", int(fd[1], 16), 0))
    return out


def cycles(evs):
    """One dict per request: a read on the client's fd C opens it, the first write to another
    fd L is the LLM call, reads on L are its answer, the first write to C after them the
    response; the next read on C after a response opens the next request. C and L are the two
    busiest fds; C is the one read in smaller pieces (the bench's asks are about 200 bytes, the
    LLM's answers kilobytes). The cycle pattern cannot tell them apart: read on L, write to C,
    read on C, write to L matches it just as well."""
    reads = {}
    for _, kind, fd, size in evs:
        if kind == "r":
            reads.setdefault(fd, []).append(size)
    busiest = sorted(reads, key=lambda fd: len(reads[fd]), reverse=True)[:2]
    if not busiest:
        return []
    client = min(busiest, key=lambda fd: sorted(reads[fd])[len(reads[fd]) // 2])
    return cycles_from(evs, client)


def cycles_from(evs, client):
    done, cur = [], None
    for t, kind, fd, _ in evs:
        if kind == "r" and fd == client and (cur is None or "resp" in cur):
            if cur and cur.get("calls") == 1:
                done.append(cur)
            cur = {"req": t}
        elif cur is None:
            continue
        elif kind == "w" and fd != client and "L" not in cur:
            cur.update(L=fd, llm_write=t, calls=1)
        elif kind == "w" and fd == cur.get("L") and "answer" in cur:
            cur["calls"] += 1  # a second LLM call: not a one-call request
        elif kind == "r" and fd == cur.get("L"):
            cur["answer"] = t
        elif kind == "w" and fd == client and "answer" in cur and "resp" not in cur:
            cur["resp"] = t
    return done


def p50(values):
    v = sorted(values)
    return v[len(v) // 2] * 1e6 if v else float("nan")


def main():
    bench, triage = sys.argv[1], os.path.abspath(sys.argv[2])
    kind = sys.argv[3] if len(sys.argv) > 3 else "json"
    tmp = tempfile.mkdtemp(prefix="floor-phases-")
    env = dict(os.environ, LOAD_BENCH_FLOOR_KINDS=kind, LOAD_BENCH_BIN=triage)
    log = open(os.path.join(tmp, "bench.log"), "w+")
    bench_run = subprocess.Popen([bench, "--only", "floor", "--quick", "--json",
                                  os.path.join(tmp, "floor.json")], env=env, stdout=log, stderr=log)
    recs, pids, seen = {}, {}, ""
    while bench_run.poll() is None:
        time.sleep(0.01)
        log.seek(0)
        seen = log.read()
        if "triage" not in pids:
            found = subprocess.run(["pgrep", "-f", "^%s serve" % triage], capture_output=True, text=True).stdout.split()
            if found:
                pids["triage"] = found[0]
        if "proxy" not in pids:
            found = subprocess.run(["pgrep", "-f", "serve-proxy"], capture_output=True, text=True).stdout.split()
            if found:
                pids["proxy"] = found[0]
        for name, start, end in [("triage", "triage at concurrency 1", "proxy at concurrency 1"),
                                 ("proxy", "proxy at concurrency 1", "at concurrency 64")]:
            if start in seen and name not in recs and name in pids:
                recs[name] = record(pids[name], os.path.join(tmp, name + ".data"))
            if end in seen and name in recs and recs[name].returncode is None:
                stop(recs[name])
    for rec in recs.values():
        if rec.returncode is None:
            stop(rec)
    print("%-7s %8s %8s %8s %8s %8s" % ("server", "requests", "pre", "llm", "post", "serve"))
    for name in ["triage", "proxy"]:
        data = os.path.join(tmp, name + ".data")
        if not os.path.exists(data):
            print("%-7s no trace (perf record failed?)" % name)
            continue
        cs = cycles(events(data))
        print("%-7s %8d %8.1f %8.1f %8.1f %8.1f" % (
            name, len(cs), p50([c["llm_write"] - c["req"] for c in cs]),
            p50([c["answer"] - c["llm_write"] for c in cs]),
            p50([c["resp"] - c["answer"] for c in cs]),
            p50([c["resp"] - c["req"] for c in cs])))
    print("(p50, µs; traces and the bench's log in %s)" % tmp)


if __name__ == "__main__":
    main()
