"""Start-up of `triage serve` on the default config with a fresh data dir (HOME in a new temp
dir, no TRIAGE_* or HOLMES_* variables but the port): time from exec until GET /readyz answers
200 (polled every 1 ms), CPU time used by then, and RSS 0.5 s and 15 s later (the server hands
back unused pages once, 10 s after start).
Usage: python3 benches/ready_rss.py target/release/triage [RUNS]"""
import os, sys, time, subprocess, http.client, tempfile, socket
bin_ = sys.argv[1]; runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
res = []
for i in range(runs):
    home = tempfile.mkdtemp(prefix="triage-ready-")
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRIAGE_", "HOLMES_"))}
    env.update(HOME=home, HOLMES_PORT=str(port), HOLMES_HOST="127.0.0.1", XDG_DATA_HOME=home + "/data", OPENAI_API_KEY="sk-test")
    t0 = time.perf_counter()
    p = subprocess.Popen([bin_, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=home)
    ready = None
    while time.perf_counter() - t0 < 10 and p.poll() is None:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1); c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                ready = time.perf_counter() - t0
                f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
                cpu = (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) * 1000 / os.sysconf("SC_CLK_TCK")
                break
        except OSError: pass
        time.sleep(0.001)
    def rss_mib():
        if p.poll() is not None: return float("nan")
        return int([l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmRSS")][0].split()[1]) / 1024
    time.sleep(0.5); rss = rss_mib()
    time.sleep(14.5); rss_later = rss_mib()
    p.terminate(); p.wait()
    res.append((ready, rss))
    print(f"run {i}: ready {ready*1000:.1f} ms, CPU at ready {cpu:.0f} ms (incl. reaped children), idle RSS {rss:.1f} MiB after 0.5 s, {rss_later:.1f} MiB after 15 s" if ready else f"run {i}: not ready, rc={p.returncode}")
