#!/usr/bin/env python3
"""A day of mixed traffic, shortened: `webimage serve` (a release build) under
requests of every kind a public image service gets, with its memory recorded.

    python3 Benchmarks/soak/soak_mixed.py [--requests 20000] [--clients 8]
        [--idle 60] [--tool PATH] [--json OUT] [--env NAME=VALUE ...]

What it makes (in a temporary folder, from libvips' `vips` tool and the tool's
own `samples`): photos (JPEG, EXIF orientations), PNGs with alpha, WebP, AVIF,
animated GIF, a 4000x3000 JPEG and PNG. A loopback origin serves them, and a few
paths that fail (404, 500, a truncated body).

Each request: a random image, a random box from 16 to 2000, a random format,
0 to 3 transform steps within the documented limits; 30 % repeat an earlier
request. About 5 % are deliberate mistakes (a bad parameter, a crop outside the
image), which must be answered 4xx; requests to the failing paths must be
answered 404 or 502.

It records the server's anonymous RSS (RssAnon) and resident set every 1 000
requests, then after `--idle` seconds of no traffic, and fails (exit 1) on:
- any 5xx that is not an origin's fault (502 for the failing paths), or a
  connection that fails;
- a deliberate mistake that is not a 4xx;
- anonymous RSS above the bound: memory.costLimit + 512 MiB (the work budget's
  peak, serving.md) + 256 MiB;
- anonymous RSS beyond the memory tier's bytes after the idle wait above twice
  the same after the first 1 000 requests (or after the first tenth of a
  shorter run). The tier (`memory.costLimit`) is kept by design and fills over
  the run, so it is left out on both sides: what is checked is whether the rest
  comes back.

`make soak-mixed` runs 20 000 requests; CI runs 2 000 (`make soak-mixed-ci`).
"""
import argparse, json, os, random, shutil, socket, subprocess, sys, tempfile, threading, time
import http.client, http.server, urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1024 * 1024
MEMORY_LIMIT = 256 * MIB
WORK_PEAK = 512 * MIB
MARGIN = 256 * MIB


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vips(*args):
    subprocess.run(["vips", *map(str, args)], check=True, capture_output=True)


def make_corpus(tool, folder):
    """The images the origin serves, by kind."""
    subprocess.run([tool, "samples", folder], check=True, capture_output=True)
    made = {"photo": [], "png": [], "webp": [], "avif": [], "gif": [], "large": []}
    for name in sorted(os.listdir(folder)):
        kind = {".jpg": "photo", ".png": "png", ".gif": "gif"}.get(os.path.splitext(name)[1])
        if kind:
            made[kind].append(name)
    for index, photo in enumerate(["photo-1.jpg", "photo-2.jpg", "photo-3.jpg"]):
        source = os.path.join(folder, photo)
        vips("copy", source, os.path.join(folder, f"photo-{index}.webp[Q=80]"))
        vips("copy", source, os.path.join(folder, f"photo-{index}.avif[Q=50]"))
        made["webp"].append(f"photo-{index}.webp")
        made["avif"].append(f"photo-{index}.avif")
    vips("copy", os.path.join(folder, "logo.png"), os.path.join(folder, "logo.webp[lossless]"))
    made["webp"].append("logo.webp")
    # Large images: a 4000x3000 JPEG with detail (resized photo) and a PNG.
    vips("resize", os.path.join(folder, "photo-1.jpg"), os.path.join(folder, "large.v"), 4000 / 1200)
    vips("extract_area", os.path.join(folder, "large.v"), os.path.join(folder, "large.jpg[Q=85]"), 0, 0, 4000, 3000)
    vips("extract_area", os.path.join(folder, "large.v"), os.path.join(folder, "large.png[compression=1]"), 0, 0, 4000, 3000)
    os.remove(os.path.join(folder, "large.v"))
    vips("copy", os.path.join(folder, "large.jpg"), os.path.join(folder, "large.webp[Q=75]"))
    vips("rot", os.path.join(folder, "large.jpg"), os.path.join(folder, "large-portrait.jpg[Q=85]"), "d90")
    made["large"] = ["large.jpg", "large.png", "large.webp", "large-portrait.jpg"]
    return made


class Origin(http.server.ThreadingHTTPServer):
    daemon_threads = True


def origin_handler(folder):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            path = urllib.parse.urlparse(self.path).path.lstrip("/")
            if path == "fail/404":
                return self.answer(404, b"missing")
            if path == "fail/500":
                return self.answer(500, b"broken")
            if path == "fail/truncated.jpg":
                with open(os.path.join(folder, "photo-1.jpg"), "rb") as f:
                    body = f.read()
                return self.answer(200, body[: len(body) // 3], "image/jpeg")
            full = os.path.join(folder, os.path.basename(path))
            if not os.path.isfile(full):
                return self.answer(404, b"missing")
            with open(full, "rb") as f:
                self.answer(200, f.read(), "application/octet-stream")

        def answer(self, status, body, kind="text/plain"):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


STEPS = ["blur:{s}", "sharpen:{s2}", "rotate:90", "rotate:{deg}", "flip:h", "flip:v", "grey", "trim", "round:{r}",
         "tint:255,136,0", "crop:{x},{y},{cw},{ch}", "pad:{p}x{p}", "flatten", "resize:{cw}x{ch}:fill",
         "watermark:logo", "watermark:logo:nw:0.8:{m}"]


def random_steps(rng, box):
    steps = []
    for _ in range(rng.randint(0, 3)):
        template = rng.choice(STEPS)
        values = {"s": round(rng.uniform(0.5, 8), 1), "s2": round(rng.uniform(0.5, 3), 1), "deg": rng.randint(1, 359),
                  "r": rng.randint(1, 40), "x": rng.randint(0, max(0, box // 4)), "y": rng.randint(0, max(0, box // 4)),
                  "cw": rng.randint(1, max(1, box // 2)), "ch": rng.randint(1, max(1, box // 2)), "p": rng.randint(16, 2000),
                  "m": rng.randint(0, 200)}
        steps.append(template.format(**values))
    return steps


def make_request(rng, corpus, origin, failing):
    """(path, expectation): 'ok' (2xx, or a 413 or 422 the image's size explains),
    'client' (must be 4xx), 'origin' (must be 404, 415, 502, or 503 once the
    failing origin's circuit is open). The failing paths are on an origin of
    their own, so that its breaker never refuses the good images."""
    roll = rng.random()
    if roll < 0.02:
        name = rng.choice(["fail/404", "fail/500", "fail/truncated.jpg"])
        url = f"http://127.0.0.1:{failing}/{name}"
        return f"/thumbnail?url={urllib.parse.quote(url, safe='')}&w=100", "origin"
    kind = rng.choice(["photo", "photo", "png", "webp", "avif", "gif", "large", "large"])
    name = rng.choice(corpus[kind])
    url = urllib.parse.quote(f"http://127.0.0.1:{origin}/{name}", safe="")
    if roll < 0.05:
        mistake = rng.choice(["w=0", "w=abc", "w=100&format=bmp", "w=100&t=blur:0", "w=100&crop=centre",
                              "w=64&h=64&t=crop:0,0,5000,5000", "w=100&t=nosuchstep", "w=100&dpr=9"])
        return f"/thumbnail?url={url}&{mistake}", "client"
    box = rng.randint(16, 2000)
    query = [f"url={url}", f"w={box}"]
    if rng.random() < 0.4:
        query.append(f"h={rng.randint(16, 2000)}")
    fmt = rng.choice(["auto", "auto", "jpeg", "webp", "png", "avif", "gif"])
    if fmt != "auto":
        query.append(f"format={fmt}")
    steps = random_steps(rng, box)
    if steps:
        query.append("t=" + urllib.parse.quote(";".join(steps), safe=":,;"))
    return "/thumbnail?" + "&".join(query), "ok"


def tier_bytes(port):
    """The memory tier's bytes from /metrics (what the cache holds on purpose)."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
        connection.close()
        for line in text.splitlines():
            if line.startswith("webimage_memory_tier_bytes "):
                return int(float(line.split()[1]))
    except Exception:
        pass
    return 0


def memory(pid):
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("RssAnon", "VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) * 1024
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--idle", type=float, default=60)
    parser.add_argument("--tool", default=os.path.join(ROOT, ".build", "release", "webimage"))
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server's environment (LD_PRELOAD=…)")
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE passed to serve as --set")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not os.access(args.tool, os.X_OK):
        sys.exit(f"no tool at {args.tool}: swift build -c release --product webimage")

    work = tempfile.mkdtemp(prefix="soak-mixed-")
    server = None
    try:
        images = os.path.join(work, "images")
        corpus = make_corpus(args.tool, images)
        origin_port, failing_port = free_port(), free_port()
        for port_number in (origin_port, failing_port):
            origin = Origin(("127.0.0.1", port_number), origin_handler(images))
            threading.Thread(target=origin.serve_forever, daemon=True).start()

        port = free_port()
        env = dict(os.environ)
        for item in args.env:
            key, _, value = item.partition("=")
            env[key] = value
        command = [args.tool, "serve", "--cache-dir", os.path.join(work, "cache"),
                   "--set", f"http.port={port}", "--set", f"thumbnail.allowedHosts=127.0.0.1:{origin_port},127.0.0.1:{failing_port}",
                   "--set", "loader.blockPrivateAddresses=false", "--set", f"memory.costLimit={MEMORY_LIMIT}"]
        marks = os.path.join(work, "marks")
        os.makedirs(marks)
        shutil.copy(os.path.join(images, "logo.png"), os.path.join(marks, "logo.png"))
        command += ["--set", f"thumbnail.watermarks={marks}"]
        for item in args.set:
            command += ["--set", item]
        log = open(os.path.join(work, "serve.log"), "w")
        server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        line = server.stdout.readline()
        if "listening" not in line:
            sys.exit(f"serve did not start: {line}")

        rng = random.Random(args.seed)
        plan, seen = [], []
        for _ in range(args.requests):
            if seen and rng.random() < 0.3:
                plan.append(rng.choice(seen))
            else:
                request = make_request(rng, corpus, origin_port, failing_port)
                plan.append(request)
                seen.append(request)

        lock = threading.Lock()
        state = {"next": 0, "done": 0, "statuses": {}, "failures": [], "samples": []}
        step = 1000 if args.requests >= 2000 else max(100, args.requests // 10)
        started = time.monotonic()

        def client():
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            while True:
                with lock:
                    index = state["next"]
                    state["next"] += 1
                if index >= len(plan):
                    break
                path, expect = plan[index]
                try:
                    connection.request("GET", path, headers={"Accept": "image/avif,image/webp,*/*"})
                    response = connection.getresponse()
                    body = response.read()
                    status = response.status
                except Exception as error:  # a failed connection is a failure of the service
                    connection.close()
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                    status, body = 0, str(error).encode()
                bad = None
                if status == 0 or (status >= 500 and not (expect == "origin" and status in (502, 503))):
                    bad = "5xx or no answer"
                elif expect == "client" and not 400 <= status < 500:
                    bad = "a mistake not answered 4xx"
                elif expect == "origin" and status not in (404, 415, 502, 503):
                    bad = "an origin failure not answered 404, 415, 502 or 503"
                elif expect == "ok" and status >= 400 and status not in (413, 422):
                    bad = "a valid request refused"
                with lock:
                    state["statuses"][status] = state["statuses"].get(status, 0) + 1
                    if bad and len(state["failures"]) < 50:
                        state["failures"].append({"path": path, "status": status, "why": bad, "body": body[:300].decode("utf-8", "replace")})
                    elif bad:
                        state["failures"].append(None)
                    state["done"] += 1
                    if state["done"] % step == 0:
                        sample = {"requests": state["done"], "seconds": round(time.monotonic() - started, 1), **memory(server.pid),
                                  "tier": tier_bytes(port)}
                        state["samples"].append(sample)
                        print(f"{sample['requests']:>6} requests {sample['seconds']:>7.1f} s  anon {sample['RssAnon'] / MIB:7.1f} MiB"
                              f"  (memory tier {sample['tier'] / MIB:5.1f} MiB)  rss {sample['VmRSS'] / MIB:7.1f} MiB", flush=True)
            connection.close()

        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        busy = time.monotonic() - started
        time.sleep(args.idle)
        idle = {**memory(server.pid), "tier": tier_bytes(port)}
        print(f"after {args.idle:.0f} s idle: anon {idle['RssAnon'] / MIB:.1f} MiB (memory tier {idle['tier'] / MIB:.1f} MiB), "
              f"rss {idle['VmRSS'] / MIB:.1f} MiB, peak rss {idle['VmHWM'] / MIB:.1f} MiB")

        bound = MEMORY_LIMIT + WORK_PEAK + MARGIN
        first = state["samples"][0]["RssAnon"] if state["samples"] else idle["RssAnon"]
        peak_anon = max([s["RssAnon"] for s in state["samples"]] + [idle["RssAnon"]])
        problems = []
        failures = [f for f in state["failures"]]
        if failures:
            problems.append(f"{len(failures)} requests answered wrongly")
        if peak_anon > bound:
            problems.append(f"anonymous RSS reached {peak_anon / MIB:.0f} MiB, over the bound {bound / MIB:.0f} MiB")
        first_beyond = first - (state["samples"][0]["tier"] if state["samples"] else idle["tier"])
        idle_beyond = idle["RssAnon"] - idle["tier"]
        if idle_beyond > 2 * first_beyond:
            problems.append(f"after {args.idle:.0f} s idle anonymous RSS beyond the memory tier is {idle_beyond / MIB:.0f} MiB, over twice "
                            f"its {first_beyond / MIB:.0f} MiB after the first {state['samples'][0]['requests'] if state['samples'] else 0} requests")
        server.send_signal(15)
        code = server.wait(timeout=60)
        server = None
        if code != 0:
            problems.append(f"serve exited {code} on SIGTERM")
        result = {"requests": args.requests, "clients": args.clients, "seconds": round(busy, 1),
                  "statuses": {str(k): v for k, v in sorted(state["statuses"].items())}, "samples": state["samples"],
                  "idle": {"seconds": args.idle, **idle}, "boundBytes": bound, "peakAnonBytes": peak_anon,
                  "env": args.env, "set": args.set, "failures": [f for f in failures if f][:20], "problems": problems}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        print("statuses:", result["statuses"])
        for failure in result["failures"][:10]:
            print("  ", failure)
        if problems:
            print("soak-mixed FAILED: " + "; ".join(problems))
            print(open(os.path.join(work, "serve.log")).read()[-3000:])
            return 1
        print(f"soak-mixed passed: {args.requests} requests in {busy:.0f} s, anonymous RSS peak {peak_anon / MIB:.0f} MiB "
              f"(bound {bound / MIB:.0f}), {idle['RssAnon'] / MIB:.0f} MiB after {args.idle:.0f} s idle "
              f"({idle_beyond / MIB:.0f} beyond the memory tier, against {first_beyond / MIB:.0f} after the first sample)")
        return 0
    finally:
        if server is not None:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
