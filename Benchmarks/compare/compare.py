#!/usr/bin/env python3
"""Side-by-side comparisons of swift-web-image with peers, in one run.

    python3 Benchmarks/compare/compare.py cache-hits [--rounds 5] [--entries 2000]
    python3 Benchmarks/compare/compare.py downloads  [--rounds 5] [--files 5000]
    python3 Benchmarks/compare/compare.py thumbnails [--rounds 3] [--images 24]
    python3 Benchmarks/compare/compare.py scaling    [--rounds 3] [--max-entries 1000000]
    python3 Benchmarks/compare/compare.py plots      (PNG charts of the results, into docs/images)

Each comparison runs the same work through this package (webimage-bench, built
in release) and through a peer, interleaved, for several rounds, and prints the
median of each and their ratio. Inputs are generated here; peers come from
Debian packages (gcc + liblmdb-dev for the C loops, nginx and curl for
downloads), installed if missing. Results are also written as JSON to
Benchmarks/results/<comparison>.json.
"""
import argparse, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "Benchmarks")
HERE = os.path.join(BENCH, "compare")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def ensure_apt(*packages):
    missing = [p for p in packages if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if missing:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "update", "-qq"], check=True)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq"] + missing, check=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def build_bench():
    print("building webimage-bench (release)...", file=sys.stderr)
    subprocess.run(["swift", "build", "-c", "release", "--package-path", BENCH, "--product", "webimage-bench"], check=True)
    return os.path.join(run(["swift", "build", "-c", "release", "--package-path", BENCH, "--show-bin-path"]).strip(), "webimage-bench")


def compile_c(name, *libs):
    out = os.path.join(tempfile.gettempdir(), name)
    subprocess.run(["gcc", "-O2", "-o", out, os.path.join(HERE, name + ".c"), *libs], check=True)
    return out


def as_json(output):
    return json.loads(output.strip().splitlines()[-1])


def report(title, rows, results_name, extra):
    print(f"\n{title}")
    for name, values, unit in rows:
        print(f"  {name:<44} median {statistics.median(values):>12.1f} {unit}   (rounds: {', '.join(f'{v:.1f}' for v in values)})")
    os.makedirs(os.path.join(BENCH, "results"), exist_ok=True)
    with open(os.path.join(BENCH, "results", results_name + ".json"), "w") as f:
        json.dump({"rows": [{"name": n, "values": v, "median": statistics.median(v), "unit": u} for n, v, u in rows], **extra}, f, indent=2)


def cache_hits(args):
    ensure_apt("gcc", "liblmdb-dev")
    bench = build_bench()
    mdb_loop = compile_c("mdb_get_loop", "-llmdb")
    file_loop = compile_c("file_read_loop")
    work = tempfile.mkdtemp(prefix="webimage-bench-")
    try:
        lmdb_dir, files_dir = os.path.join(work, "lmdb"), os.path.join(work, "files")
        for kind, directory in (("lmdb", lmdb_dir), ("files", files_dir)):
            run([bench, "store-fill", kind, directory, str(args.entries), str(args.size)])
        file_list = os.path.join(work, "files.txt")
        with open(file_list, "w") as f:
            for name in sorted(os.listdir(files_dir)):
                if name != "tmp" and not name.endswith(".meta"):
                    f.write(os.path.join(files_dir, name) + "\n")
        n, gets = str(args.entries), str(args.gets)
        scenarios = [
            ("LMDBCacheStore.data(forKey:)", [bench, "store-get", "lmdb", lmdb_dir, n, gets]),
            ("LMDBCacheStore, readsOnCallingThread", [bench, "store-get", "lmdb-inline", lmdb_dir, n, gets]),
            ("C loop: mdb_get + memcpy", [mdb_loop, lmdb_dir, n, gets]),
            ("FileCacheStore.data(forKey:)", [bench, "store-get", "files", files_dir, n, gets]),
            ("C loop: open/read/close", [file_loop, file_list, gets]),
            ("ImageManager disk hit (LMDB, bytes)", [bench, "manager-hit", "lmdb", lmdb_dir, n, gets]),
            ("ImageManager disk hit (LMDB inline, bytes)", [bench, "manager-hit", "lmdb-inline", lmdb_dir, n, gets]),
            ("ImageManager disk hit (files, bytes)", [bench, "manager-hit", "files", files_dir, n, gets]),
            ("ImageManager memory hit", [bench, "manager-hit", "memory", work, n, gets]),
        ]
        results = {name: [] for name, _ in scenarios}
        for _ in range(args.rounds):
            for name, cmd in scenarios:
                results[name].append(as_json(run(cmd))["nsPerGet"])
        rows = [(name, [v / 1000 for v in values], "µs/get") for name, values in results.items()]
        med = {name: statistics.median(v) for name, v in results.items()}
        ratios = {
            "LMDB store / C mdb_get": med["LMDBCacheStore.data(forKey:)"] / med["C loop: mdb_get + memcpy"],
            "LMDB store (readsOnCallingThread) / C mdb_get": med["LMDBCacheStore, readsOnCallingThread"] / med["C loop: mdb_get + memcpy"],
            "Manager LMDB inline hit / C mdb_get": med["ImageManager disk hit (LMDB inline, bytes)"] / med["C loop: mdb_get + memcpy"],
            "File store / C open-read-close": med["FileCacheStore.data(forKey:)"] / med["C loop: open/read/close"],
            "Manager LMDB hit / C mdb_get": med["ImageManager disk hit (LMDB, bytes)"] / med["C loop: mdb_get + memcpy"],
            "Manager file hit / C open-read-close": med["ImageManager disk hit (files, bytes)"] / med["C loop: open/read/close"],
        }
        report(f"Cache hits: {args.entries} entries of {args.size} bytes, {args.gets} random warm gets, {args.rounds} rounds interleaved",
               rows, "cache-hits", {"ratios": ratios, "entries": args.entries, "size": args.size, "gets": args.gets})
        for name, ratio in ratios.items():
            print(f"  ratio {name:<40} {ratio:.2f}x  (target: within 2x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def downloads(args):
    ensure_apt("nginx", "curl")
    bench = build_bench()
    work = tempfile.mkdtemp(prefix="webimage-dl-")
    nginx = None
    try:
        root = os.path.join(work, "www")
        os.makedirs(root)
        payload = os.urandom(args.size)
        for i in range(args.files):
            with open(os.path.join(root, f"{i}.jpg"), "wb") as f:
                f.write(payload)
        port = free_port()
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""daemon off; master_process off; worker_processes 1; pid {work}/nginx.pid; error_log {work}/error.log;
events {{ worker_connections 1024; }}
http {{ access_log off; keepalive_requests 100000; sendfile on;
  client_body_temp_path {work}; proxy_temp_path {work}; fastcgi_temp_path {work}; uwsgi_temp_path {work}; scgi_temp_path {work};
  server {{ listen 127.0.0.1:{port}; root {root}; }} }}
""")
        nginx = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        urls = [f"http://127.0.0.1:{port}/{i}.jpg" for i in range(args.files)]
        url_list = os.path.join(work, "urls.txt")
        with open(url_list, "w") as f:
            f.write("\n".join(urls) + "\n")
        curl_config = os.path.join(work, "curl.txt")
        with open(curl_config, "w") as f:
            for url in urls:
                f.write(f'url = "{url}"\noutput = "/dev/null"\n')
        ours, peer = [], []
        for _ in range(args.rounds):
            ours.append(as_json(run([bench, "download", url_list, "6"]))["seconds"])
            started = time.perf_counter()
            subprocess.run(["curl", "--parallel", "--parallel-max", "6", "-s", "-K", curl_config], check=True, stderr=subprocess.DEVNULL)
            peer.append(time.perf_counter() - started)
        rows = [("CurlLoader, 6 concurrent", [args.files / s for s in ours], "files/s"),
                ("curl --parallel --parallel-max 6", [args.files / s for s in peer], "files/s")]
        ratio = statistics.median(peer) / statistics.median(ours)
        report(f"Downloads: {args.files} files of {args.size} bytes from nginx on loopback, {args.rounds} rounds interleaved",
               rows, "downloads", {"ratio": ratio, "files": args.files, "size": args.size})
        print(f"  ratio CurlLoader / curl --parallel (throughput) {ratio:.2f}x  (target: at least 0.9x)")
    finally:
        if nginx:
            nginx.terminate()
            nginx.wait()
        shutil.rmtree(work, ignore_errors=True)


def timed(cmd):
    """Wall-clock seconds and peak RSS (KiB) of a command, through GNU time."""
    result = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {result.stderr[-500:]}")
    seconds, rss = result.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(rss)


def thumbnails(args):
    ensure_apt("time", "libvips-tools", "libjpeg-turbo-progs")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "pillow", "pyvips"], check=True)
    print("building webimage (release)...", file=sys.stderr)
    subprocess.run(["swift", "build", "-c", "release", "--package-path", ROOT, "--product", "webimage"], check=True)
    tool = os.path.join(run(["swift", "build", "-c", "release", "--package-path", ROOT, "--show-bin-path"]).strip(), "webimage")
    work = tempfile.mkdtemp(prefix="webimage-thumbs-")
    try:
        # Photo-sized inputs: the tool's own sample photos, scaled up to about 12 MP.
        samples = os.path.join(work, "samples")
        run([tool, "samples", samples])
        inputs = os.path.join(work, "in")
        os.makedirs(inputs)
        sources = [os.path.join(samples, f"photo-{i}.jpg") for i in (1, 2, 3)]
        for i in range(args.images):
            source = sources[i % 3]
            run(["vips", "resize", source, os.path.join(inputs, f"img{i:03}.jpg[Q=90]"), str(2.5 + (i % 5) * 0.1)])
        files = sorted(os.path.join(inputs, f) for f in os.listdir(inputs))
        cores = os.cpu_count() or 2
        here = os.path.dirname(os.path.abspath(__file__))

        def out(name):
            directory = os.path.join(work, "out-" + name)
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory)
            return directory

        scenarios = [
            ("webimage load --thumbnail 256x256", lambda: [tool, "load", "--thumbnail", "256x256", "--format", "jpeg", "--quality", "85",
                                                            "--out", out("webimage"), "--store", "none", "--quiet", "--concurrency", str(cores), *files]),
            ("vipsthumbnail -s 256", lambda: ["vipsthumbnail", "-s", "256", "-o", os.path.join(out("vips"), "%s.jpg[Q=85]"), *files]),
            (f"Pillow thumbnail() + draft, {cores} processes", lambda: [sys.executable, os.path.join(here, "pillow_thumbs.py"), out("pillow"), str(cores), *files]),
            ("pyvips thumbnail", lambda: [sys.executable, os.path.join(here, "pyvips_thumbs.py"), out("pyvips"), *files]),
            ("djpeg -scale 1/8, one process (decode only)", lambda: ["sh", "-c", " ".join(f"djpeg -scale 1/8 {f} > /dev/null &&" for f in files) + " true"]),
        ]
        times = {name: [] for name, _ in scenarios}
        rss = {name: [] for name, _ in scenarios}
        for _ in range(args.rounds):
            for name, make in scenarios:
                seconds, peak = timed(make())
                times[name].append(len(files) / seconds)
                rss[name].append(peak / 1024)
        rows = [(name, values, "images/s") for name, values in times.items()] + [(name + " (peak RSS)", rss[name], "MiB") for name in rss]
        med = {name: statistics.median(v) for name, v in times.items()}
        ours = med["webimage load --thumbnail 256x256"]
        ratios = {f"webimage / {name}": ours / value for name, value in med.items() if not name.startswith("webimage")}
        report(f"Thumbnails: {len(files)} JPEGs of about 12 MP to 256 px JPEG, {cores} cores, {args.rounds} rounds interleaved",
               rows, "thumbnails", {"ratios": ratios, "images": len(files)})
        for name, ratio in ratios.items():
            print(f"  ratio {name:<60} {ratio:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def scaling(args):
    """Cache-hit latency against the number of entries (10^3 .. 10^6)."""
    ensure_apt("gcc", "liblmdb-dev")
    bench = build_bench()
    mdb_loop = compile_c("mdb_get_loop", "-llmdb")
    work = tempfile.mkdtemp(prefix="webimage-scaling-")
    try:
        counts = [n for n in (1_000, 10_000, 100_000, 1_000_000) if n <= args.max_entries]
        gets = str(args.gets)
        scenarios = []  # (name, entries, command)
        for n in counts:
            lmdb_dir = os.path.join(work, f"lmdb-{n}")
            fill = as_json(run([bench, "store-fill", "lmdb", lmdb_dir, str(n), str(args.size), "512"]))
            print(f"  filled LMDB with {n} entries in {fill['seconds']:.1f} s", file=sys.stderr)
            scenarios += [
                ("LMDBCacheStore.data(forKey:)", n, [bench, "store-get", "lmdb", lmdb_dir, str(n), gets]),
                ("ImageManager disk hit (LMDB)", n, [bench, "manager-hit", "lmdb", lmdb_dir, str(n), gets]),
                ("C loop: mdb_get + memcpy", n, [mdb_loop, lmdb_dir, str(n), gets]),
            ]
            if n <= args.max_file_entries:
                files_dir = os.path.join(work, f"files-{n}")
                fill = as_json(run([bench, "store-fill", "files", files_dir, str(n), str(args.size), "64"]))
                print(f"  filled the file store with {n} entries in {fill['seconds']:.1f} s", file=sys.stderr)
                scenarios.append(("FileCacheStore.data(forKey:)", n, [bench, "store-get", "files", files_dir, str(n), gets]))
        results = {(name, n): [] for name, n, _ in scenarios}
        for _ in range(args.rounds):
            for name, n, cmd in scenarios:
                results[(name, n)].append(as_json(run(cmd))["nsPerGet"] / 1000)
        rows = [(f"{name} @ {n:>9,} entries", values, "µs/get") for (name, n), values in results.items()]
        series = {}
        for (name, n), values in results.items():
            series.setdefault(name, {})[n] = statistics.median(values)
        ratios = {name: points[max(points)] / points[min(points)] for name, points in series.items() if len(points) > 1}
        report(f"Cache-hit latency against entries ({', '.join(f'{n:,}' for n in counts)}) of {args.size} bytes, "
               f"{args.gets} random warm gets, {args.rounds} rounds interleaved",
               rows, "scaling", {"series": {name: {str(n): v for n, v in points.items()} for name, points in series.items()},
                                 "ratios": ratios, "size": args.size, "gets": args.gets})
        for name, ratio in ratios.items():
            points = series[name]
            print(f"  ratio {name:<34} {max(points):>9,} vs {min(points):,} entries: {ratio:.2f}x  (target: within 1.5x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def plots(args):
    """PNG charts of Benchmarks/results/*.json, into docs/images."""
    try:
        import matplotlib
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "matplotlib"], check=True)
        import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    results = os.path.join(BENCH, "results")
    images = os.path.join(ROOT, "docs", "images")
    os.makedirs(images, exist_ok=True)

    def load(name):
        path = os.path.join(results, name + ".json")
        return json.load(open(path)) if os.path.exists(path) else None

    def bars(ax, rows, unit, title, highlight="webimage"):
        names = [r["name"] for r in rows]
        values = [r["median"] for r in rows]
        colors = ["#d2691e" if highlight.lower() in n.lower() or "Store" in n or "Manager" in n or "CurlLoader" in n else "#7f8c9a" for n in names]
        ax.barh(range(len(rows)), values, color=colors)
        ax.set_yticks(range(len(rows)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(unit)
        ax.set_title(title, fontsize=10)
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:.1f}", va="center", fontsize=8)

    written = []
    data = load("thumbnails")
    if data:
        speed = [r for r in data["rows"] if r["unit"] == "images/s"]
        memory = [dict(r, name=r["name"].replace(" (peak RSS)", "")) for r in data["rows"] if r["unit"] == "MiB"]
        fig, (a, b) = plt.subplots(1, 2, figsize=(12, 3.6))
        bars(a, speed, "images/s (higher is better)", "Thumbnails: throughput")
        bars(b, memory, "MiB (lower is better)", "Thumbnails: peak RSS")
        fig.tight_layout()
        fig.savefig(os.path.join(images, "thumbnails.png"), dpi=110)
        written.append("thumbnails.png")
    for name, size, unit, title in (("cache-hits", (9, 3.8), "µs per get (lower is better)", "Cache hits, 32 KiB entries, warm"),
                                    ("downloads", (8, 2.2), "files/s (higher is better)", "Downloads from nginx on loopback, 6 at once")):
        data = load(name)
        if data:
            fig, a = plt.subplots(figsize=size)
            bars(a, data["rows"], unit, title)
            fig.tight_layout()
            fig.savefig(os.path.join(images, name + ".png"), dpi=110)
            written.append(name + ".png")
    data = load("scaling")
    if data:
        fig, a = plt.subplots(figsize=(8, 4))
        for name, points in data["series"].items():
            xs = sorted(int(n) for n in points)
            a.plot(xs, [points[str(x)] for x in xs], marker="o", label=name)
        a.set_xscale("log")
        a.set_xlabel("entries in the store")
        a.set_ylabel("µs per get (median)")
        a.set_ylim(bottom=0)
        a.set_title(f"Cache-hit latency against entry count ({data['size']} B entries, random warm gets)", fontsize=10)
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(images, "cache-scaling.png"), dpi=110)
        written.append("cache-scaling.png")
    print("wrote " + ", ".join(os.path.join("docs/images", w) for w in written))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="comparison", required=True)
    hits = sub.add_parser("cache-hits")
    hits.add_argument("--rounds", type=int, default=5)
    hits.add_argument("--entries", type=int, default=2000)
    hits.add_argument("--size", type=int, default=32 * 1024)
    hits.add_argument("--gets", type=int, default=20000)
    dl = sub.add_parser("downloads")
    dl.add_argument("--rounds", type=int, default=5)
    dl.add_argument("--files", type=int, default=5000)
    dl.add_argument("--size", type=int, default=32 * 1024)
    thumbs = sub.add_parser("thumbnails")
    thumbs.add_argument("--rounds", type=int, default=3)
    thumbs.add_argument("--images", type=int, default=24)
    scale = sub.add_parser("scaling")
    scale.add_argument("--rounds", type=int, default=3)
    scale.add_argument("--max-entries", type=int, default=1_000_000)
    scale.add_argument("--max-file-entries", type=int, default=100_000)
    scale.add_argument("--size", type=int, default=1024)
    scale.add_argument("--gets", type=int, default=20000)
    sub.add_parser("plots")
    args = parser.parse_args()
    {"cache-hits": cache_hits, "downloads": downloads, "thumbnails": thumbnails, "scaling": scaling, "plots": plots}[args.comparison](args)


if __name__ == "__main__":
    main()
