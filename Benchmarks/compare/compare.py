#!/usr/bin/env python3
"""Side-by-side comparisons of swift-web-image with peers, in one run.

    python3 Benchmarks/compare/compare.py cache-hits [--rounds 5] [--entries 2000]
    python3 Benchmarks/compare/compare.py downloads  [--rounds 5] [--files 5000]
    python3 Benchmarks/compare/compare.py thumbnails [--rounds 3] [--images 270] [--progressive] [--oriented] [--megapixels 2|12]
    python3 Benchmarks/compare/compare.py encoders [--rounds 3] [--repeats 3] [--quality 80] [--photo PATH]
    python3 Benchmarks/compare/compare.py scaling    [--rounds 3] [--max-entries 1000000]
    python3 Benchmarks/compare/compare.py server     [--rounds 3] [--photos 60] [--seconds 10]
    python3 Benchmarks/compare/compare.py shared     [--rounds 5] [--entries 2000] [--gets 20000]
    python3 Benchmarks/compare/compare.py s3         [--rounds 5] [--entries 500] [--gets 2000]
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
                if name != "tmp":
                    f.write(os.path.join(files_dir, name) + "\n")
        n, gets = str(args.entries), str(args.gets)
        # A memory hit takes well under a microsecond: 20x the gets, so that a
        # round lasts a fraction of a second rather than a few milliseconds.
        memory_gets = str(args.gets * 20)
        scenarios = [
            ("LMDBCacheStore.data(forKey:)", [bench, "store-get", "lmdb", lmdb_dir, n, gets]),
            ("LMDBCacheStore, reads on the I/O pool", [bench, "store-get", "lmdb-pooled", lmdb_dir, n, gets]),
            ("C loop: mdb_get + memcpy", [mdb_loop, lmdb_dir, n, gets]),
            ("FileCacheStore.data(forKey:)", [bench, "store-get", "files", files_dir, n, gets]),
            ("C loop: open/read/close", [file_loop, file_list, gets]),
            ("ImageManager disk hit (LMDB, bytes)", [bench, "manager-hit", "lmdb", lmdb_dir, n, gets]),
            ("ImageManager disk hit (LMDB pooled, bytes)", [bench, "manager-hit", "lmdb-pooled", lmdb_dir, n, gets]),
            ("ImageManager disk hit (files, bytes)", [bench, "manager-hit", "files", files_dir, n, gets]),
            ("ImageManager memory hit", [bench, "manager-hit", "memory", work, n, memory_gets]),
            ("ImageManager.memoryResult (synchronous memory hit)", [bench, "manager-hit", "memory-sync", work, n, memory_gets]),
        ]
        results = {name: [] for name, _ in scenarios}
        for _ in range(args.rounds):
            for name, cmd in scenarios:
                results[name].append(as_json(run(cmd))["nsPerGet"])
        rows = [(name, [v / 1000 for v in values], "µs/get") for name, values in results.items()]
        med = {name: statistics.median(v) for name, v in results.items()}
        ratios = {
            "LMDB store / C mdb_get": med["LMDBCacheStore.data(forKey:)"] / med["C loop: mdb_get + memcpy"],
            "LMDB store (I/O pool) / C mdb_get": med["LMDBCacheStore, reads on the I/O pool"] / med["C loop: mdb_get + memcpy"],
            "Manager LMDB pooled hit / C mdb_get": med["ImageManager disk hit (LMDB pooled, bytes)"] / med["C loop: mdb_get + memcpy"],
            "File store / C open-read-close": med["FileCacheStore.data(forKey:)"] / med["C loop: open/read/close"],
            "Manager LMDB hit / C mdb_get": med["ImageManager disk hit (LMDB, bytes)"] / med["C loop: mdb_get + memcpy"],
            "Manager file hit / C open-read-close": med["ImageManager disk hit (files, bytes)"] / med["C loop: open/read/close"],
        }
        report(f"Cache hits: {args.entries} entries of {args.size} bytes, {args.gets} random warm gets, {args.rounds} rounds interleaved",
               rows, "cache-hits", {"ratios": ratios, "entries": args.entries, "size": args.size, "gets": args.gets})
        # The manager's targets (docs/performance.md); the stores' ratios are reported.
        targets = {"Manager LMDB hit / C mdb_get": "within 1.5x", "Manager file hit / C open-read-close": "within 3x"}
        # Each round's ratio too: the C loop moves with the machine's memory traffic,
        # and a round's pair shares it.
        pairs = {"Manager LMDB hit / C mdb_get": ("ImageManager disk hit (LMDB, bytes)", "C loop: mdb_get + memcpy"),
                 "Manager file hit / C open-read-close": ("ImageManager disk hit (files, bytes)", "C loop: open/read/close")}
        for name, ratio in ratios.items():
            paired = ""
            if name in pairs:
                a, b = pairs[name]
                paired = f", per round {statistics.median(x / y for x, y in zip(results[a], results[b])):.2f}x"
            print(f"  ratio {name:<40} {ratio:.2f}x{paired}  (target: {targets.get(name, 'reported')})")
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
    """Wall-clock seconds, peak RSS (KiB) and CPU seconds (user + system, children
    included) of a command, through GNU time."""
    result = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S"] + cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {result.stderr[-500:]}")
    seconds, rss, user, system = result.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(rss), float(user) + float(system)


# The C reference (jpeg_thumb_loop.c): the direct path's decode, resample and
# encode with the coder's own C, one process, one core, nothing else.
REFERENCE = "C reference: decode + resample + encode, one core"
OURS = "webimage load --thumbnail 256x256"
PILLOW_ONE = "Pillow thumbnail() + draft, one process"


def pixel_difference(ours_dir, vips_dir):
    """Mean absolute and mean signed difference (levels) of our thumbnails from
    vipsthumbnail's, over every file: both written as PNG, so no encoder error."""
    import pyvips
    absolute, signed = [], []
    for name in sorted(os.listdir(vips_dir)):
        stem = name.rsplit(".", 1)[0]
        mine = [f for f in os.listdir(ours_dir) if f.rsplit(".", 1)[0] == stem]
        a = pyvips.Image.new_from_file(os.path.join(vips_dir, name)).cast("float")
        b = pyvips.Image.new_from_file(os.path.join(ours_dir, mine[0])).cast("float")
        if (a.width, a.height, a.bands) != (b.width, b.height, b.bands):
            raise RuntimeError(f"{name}: {a.width}x{a.height} against {b.width}x{b.height}")
        absolute.append((a - b).abs().avg())
        signed.append((b - a).avg())
    return statistics.mean(absolute), statistics.mean(signed)


def store_oriented(files, progressive):
    """Rewrites each photo as a camera stores it: its pixels turned or flipped and an
    EXIF orientation of 2 to 8 (in turn) that makes them upright again, so that
    every tool must apply it to give the same upright thumbnail."""
    import pyvips
    # What turns the upright picture into the stored one, for each orientation tag.
    stored = {2: lambda im: im.fliphor(), 3: lambda im: im.rot180(), 4: lambda im: im.flipver(),
              5: lambda im: im.rot90().fliphor(), 6: lambda im: im.rot270(), 7: lambda im: im.rot270().fliphor(),
              8: lambda im: im.rot90()}
    for index, path in enumerate(files):
        orientation = 2 + index % 7
        upright = pyvips.Image.new_from_file(path, access="sequential").copy_memory()
        image = stored[orientation](upright).copy()
        image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
        image.jpegsave(path, Q=90, interlace=progressive)


def thumbnails(args):
    ensure_apt("time", "libvips-tools", "libjpeg-turbo-progs", "libjpeg62-turbo-dev", "liblcms2-dev")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "pillow", "pyvips"], check=True)
    print("building webimage (release)...", file=sys.stderr)
    subprocess.run(["swift", "build", "-c", "release", "--package-path", ROOT, "--product", "webimage"], check=True)
    tool = os.path.join(run(["swift", "build", "-c", "release", "--package-path", ROOT, "--show-bin-path"]).strip(), "webimage")
    work = tempfile.mkdtemp(prefix="webimage-thumbs-")
    try:
        # Photo-sized inputs: the tool's own sample photos, scaled to about 2 MP
        # (1200 x 1800, portrait) or about 12 MP (4000 x 3000).
        samples = os.path.join(work, "samples")
        run([tool, "samples", samples])
        inputs = os.path.join(work, "in")
        os.makedirs(inputs)
        sources = [os.path.join(samples, f"photo-{i}.jpg") for i in (1, 2, 3)]
        options = "Q=90,interlace" if args.progressive else "Q=90"
        for i in range(args.images):
            target = os.path.join(inputs, f"img{i:03}.jpg[{options}]")
            if args.megapixels == 2:
                width, height = 1200 + (i % 5) * 8, 1800
            else:
                width, height = 4000 + (i % 5) * 40, 3000
            run(["vips", "thumbnail", sources[i % 3], target, str(width), "--height", str(height), "--size", "force"])
        files = sorted(os.path.join(inputs, f) for f in os.listdir(inputs))
        if args.oriented:
            store_oriented(files, args.progressive)
        cores = os.cpu_count() or 2
        ops = os.path.join(ROOT, "Plugins", "CJPEGTurboOps")
        reference = os.path.join(work, "jpeg_thumb_loop")
        # Clang, as SwiftPM compiles the coder's C, at -O2 as in a release build.
        subprocess.run(["clang", "-O2", "-I", os.path.join(ops, "include"), "-o", reference, os.path.join(HERE, "jpeg_thumb_loop.c"),
                        *(os.path.join(ops, f) for f in ("resample.c", "dc_decode.c", "libjpeg_calls.c")), "-ljpeg", "-lm"], check=True)
        here = os.path.dirname(os.path.abspath(__file__))

        def out(name):
            directory = os.path.join(work, "out-" + name)
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory)
            return directory

        # The tool runs with its defaults, as a user would: for local files, one
        # load more than the cores in flight (while one load's file is read or its
        # thumbnail written, a hop to the I/O pool and back, the others keep the
        # cores decoding; with one load per core the cores idle about 15 %).
        scenarios = [
            (OURS, lambda: [tool, "load", "--thumbnail", "256x256", "--format", "jpeg", "--quality", "85",
                            "--out", out("webimage"), "--store", "none", "--quiet", *files]),
            ("webimage, coders=vips (libvips' JPEG loader)", lambda: [tool, "load", "--thumbnail", "256x256", "--format", "jpeg", "--quality", "85", "--set", "coders=vips",
                                                            "--out", out("webimage-vips"), "--store", "none", "--quiet", *files]),
            ("vipsthumbnail -s 256", lambda: ["vipsthumbnail", "-s", "256", "-o", os.path.join(out("vips"), "%s.jpg[Q=85]"), *files]),
            (f"Pillow thumbnail() + draft, {cores} processes", lambda: [sys.executable, os.path.join(here, "pillow_thumbs.py"), out("pillow"), str(cores), *files]),
            (PILLOW_ONE, lambda: [sys.executable, os.path.join(here, "pillow_thumbs.py"), out("pillow1"), "1", *files]),
            ("pyvips thumbnail", lambda: [sys.executable, os.path.join(here, "pyvips_thumbs.py"), out("pyvips"), *files]),
            (REFERENCE, lambda: [reference, "256", out("reference"), *files]),
        ]
        times = {name: [] for name, _ in scenarios}
        rss = {name: [] for name, _ in scenarios}
        cpu = {name: [] for name, _ in scenarios}
        for _ in range(args.rounds):
            for name, make in scenarios:
                seconds, peak, used = timed(make())
                times[name].append(len(files) / seconds)
                rss[name].append(peak / 1024)
                cpu[name].append(used * 1000 / len(files))
        rows = [(name, values, "images/s") for name, values in times.items()] + [(name + " (peak RSS)", rss[name], "MiB") for name in rss] \
            + [(name + " (CPU per image)", cpu[name], "ms") for name in cpu]
        med = {name: statistics.median(v) for name, v in times.items()}
        cpu_med = {name: statistics.median(v) for name, v in cpu.items()}
        rss_med = {name: statistics.median(v) for name, v in rss.items()}
        ours = med[OURS]
        ratios = {f"webimage / {name}": ours / value for name, value in med.items() if not name.startswith("webimage")}
        # CPU per image (lower is better), against Pillow in one process and the C reference.
        ratios["CPU per image: webimage / " + PILLOW_ONE] = cpu_med[OURS] / cpu_med[PILLOW_ONE]
        ratios["CPU per image: webimage / " + REFERENCE] = cpu_med[OURS] / cpu_med[REFERENCE]
        ratios["peak RSS: webimage / vipsthumbnail"] = rss_med[OURS] / rss_med["vipsthumbnail -s 256"]
        # Pixels: the same thumbnails as PNG from both, compared.
        png_ours, png_vips = out("png-webimage"), out("png-vips")
        run([tool, "load", "--thumbnail", "256x256", "--format", "png", "--out", png_ours, "--store", "none", "--quiet", *files])
        subprocess.run(["vipsthumbnail", "-s", "256", "-o", os.path.join(png_vips, "%s.png"), *files], check=True)
        mean_abs, mean_signed = pixel_difference(png_ours, png_vips)
        per_image = {"webimage wall ms per image": 1000 / ours, "webimage CPU ms per image": cpu_med[OURS],
                     "Pillow (one process) CPU ms per image": cpu_med[PILLOW_ONE], "C reference CPU ms per image": cpu_med[REFERENCE]}
        for name, value in per_image.items():
            print(f"  {name:<60} {value:.2f} ms")
        kind = ("progressive" if args.progressive else "baseline") + (", EXIF-oriented" if args.oriented else "")
        label = f"{args.megapixels} MP"
        report(f"Thumbnails: {len(files)} {kind} JPEGs of about {label} to 256 px JPEG, {cores} cores, {args.rounds} rounds interleaved",
               rows, f"thumbnails-{args.megapixels}mp" + ("-progressive" if args.progressive else "") + ("-oriented" if args.oriented else ""),
               {"ratios": ratios, "perImage": per_image, "images": len(files), "progressive": args.progressive, "oriented": args.oriented,
                "megapixels": args.megapixels,
                "pixels": {"meanAbsoluteDifferenceFromVipsthumbnail": mean_abs, "meanSignedDifference": mean_signed}})
        for name, ratio in ratios.items():
            print(f"  ratio {name:<70} {ratio:.2f}x")
        print(f"  pixels: mean |difference| from vipsthumbnail {mean_abs:.2f} levels, mean signed {mean_signed:+.2f} (targets: at most 2, no tone shift)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def encoders(args):
    """Encode time and bytes per format and effort at one quality, on a 2400x1600
    photo (the tool's sample photo scaled up): the figures the default efforts
    (EncodeOptions.defaultEffort) are chosen from. JPEG is the reference row."""
    bench = build_bench()
    subprocess.run(["swift", "build", "-c", "release", "--package-path", ROOT, "--product", "webimage"], check=True)
    tool = os.path.join(run(["swift", "build", "-c", "release", "--package-path", ROOT, "--show-bin-path"]).strip(), "webimage")
    work = tempfile.mkdtemp(prefix="webimage-encoders-")
    try:
        run([tool, "samples", os.path.join(work, "samples")])
        photo = os.path.join(work, "photo.png")
        source = args.photo or os.path.join(work, "samples", "photo-1.jpg")
        run(["vips", "thumbnail", source, photo, "2400", "--height", "1600", "--crop", "centre", "--size", "force"])
        rounds = [as_json(run([bench, "encode", photo, str(args.quality), str(args.repeats)])) for _ in range(args.rounds)]
        names = [(r["format"], r["effort"]) for r in rounds[0]["rows"]]
        rows = []
        for i, (name, effort) in enumerate(names):
            label = name + ("" if effort is None else f" effort {effort}")
            rows.append((label + " ms", [r["rows"][i]["ms"] for r in rounds], "ms"))
        jpeg = statistics.median(v for v in rows[0][1])
        report(f"encoders: {rounds[0]['width']}x{rounds[0]['height']} at quality {args.quality}", rows, "encoders",
               {"bytes": {n + ("" if e is None else f" effort {e}"): rounds[0]["rows"][i]["bytes"] for i, (n, e) in enumerate(names)}})
        print("\n  format                      ms    x jpeg    bytes")
        for i, (name, effort) in enumerate(names):
            ms = statistics.median(r["rows"][i]["ms"] for r in rounds)
            label = name + ("" if effort is None else f" effort {effort}")
            print(f"  {label:<24} {ms:8.1f} {ms / jpeg:8.1f}x {rounds[0]['rows'][i]['bytes']:8}")
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


def nginx_conf(work, name, port, root):
    conf = os.path.join(work, name + ".conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process off; worker_processes 1; pid {work}/{name}.pid; error_log {work}/{name}-error.log;
events {{ worker_connections 1024; }}
http {{ access_log off; keepalive_requests 1000000; sendfile on; include /etc/nginx/mime.types;
  client_body_temp_path {work}; proxy_temp_path {work}; fastcgi_temp_path {work}; uwsgi_temp_path {work}; scgi_temp_path {work};
  server {{ listen 127.0.0.1:{port}; root {root}; }} }}
""")
    return subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_http(url, timeout=120):
    import urllib.request
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status < 500:
                    return
        except Exception:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def process_tree(pid):
    """pid and all its descendants."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def peak_rss_mib(pid):
    """The sum of the peak resident sets (VmHWM) of a process and its descendants."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def cold_run(base, paths, concurrency, save=None):
    """Requests every path once, `concurrency` at a time on keep-alive connections;
    returns (requests/s, p50 ms, p99 ms)."""
    import http.client, threading
    from concurrent.futures import ThreadPoolExecutor
    host, port = base.split("//")[1].split(":")
    local = threading.local()

    def fetch(path):
        if not hasattr(local, "conn"):
            local.conn = http.client.HTTPConnection(host, int(port), timeout=120)
        started = time.perf_counter()
        local.conn.request("GET", path)
        response = local.conn.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status} {body[:200]!r}")
        if save is not None:
            save(path, body)
        return elapsed

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        latencies = sorted(pool.map(fetch, paths))
    wall = time.perf_counter() - started
    return len(paths) / wall, latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000


WRK_SCRIPT = """
local paths = {}
local index = 0
function init(args)
  for line in io.lines(args[1]) do paths[#paths + 1] = line end
  index = math.random(#paths)
end
function request()
  index = index % #paths + 1
  return wrk.format("GET", paths[index])
end
function response(status, headers, body)
  if status ~= 200 then error("HTTP " .. status) end
end
"""


def warm_run(work, base, paths, seconds, connections=16):
    """wrk over the paths, cycling; returns (requests/s, p50 ms, p99 ms)."""
    script, listing = os.path.join(work, "cycle.lua"), os.path.join(work, f"paths-{abs(hash(base))}.txt")
    with open(script, "w") as f:
        f.write(WRK_SCRIPT)
    with open(listing, "w") as f:
        f.write("\n".join(paths) + "\n")
    output = run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script, base, "--", listing])
    if "Non-2xx" in output:
        raise RuntimeError("wrk saw errors:\n" + output)

    def ms(text):
        for unit, factor in (("us", 0.001), ("ms", 1), ("s", 1000)):
            if text.endswith(unit):
                return float(text[: -len(unit)]) * factor
        raise ValueError(text)
    rate = p50 = p99 = None
    for line in output.splitlines():
        parts = line.split()
        if line.startswith("Requests/sec:"):
            rate = float(parts[1])
        elif len(parts) == 2 and parts[0] == "50%":
            p50 = ms(parts[1])
        elif len(parts) == 2 and parts[0] == "99%":
            p99 = ms(parts[1])
    return rate, p50, p99


def server(args):
    """`webimage serve` (release) against thumbor with its PIL engine, both fetching
    the same photos from nginx on loopback: cold (every URL once, concurrency 4) and
    warm (wrk, 16 connections, cycling the same URLs). Two references for warm, in
    the same run: nginx serving the finished thumbnails as files, and the floor of a
    Hummingbird service, hb-floor (a bare route answering the same bytes from a
    dictionary, release build)."""
    ensure_apt("nginx", "wrk", "libvips-tools")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "thumbor==7.8.0"], check=True)
    work = tempfile.mkdtemp(prefix="webimage-server-")
    origin = None
    try:
        print("building webimage and hb-floor (release)...", file=sys.stderr)
        subprocess.run(["swift", "build", "-c", "release", "--package-path", ROOT, "--product", "webimage"], check=True)
        tool = os.path.join(run(["swift", "build", "-c", "release", "--package-path", ROOT, "--show-bin-path"]).strip(), "webimage")
        benchmarks = os.path.join(ROOT, "Benchmarks")
        subprocess.run(["swift", "build", "-c", "release", "--package-path", benchmarks, "--product", "hb-floor"], check=True)
        floor_binary = os.path.join(run(["swift", "build", "-c", "release", "--package-path", benchmarks, "--show-bin-path"]).strip(), "hb-floor")
        # Photos: the tool's sample photos (1600x1200, 1200x1600, 2400x1350) scaled by 1.3 to 2.02: long sides of 2080 to 4850 px.
        samples, photos = os.path.join(work, "samples"), os.path.join(work, "photos")
        os.makedirs(photos)
        run([tool, "samples", samples])
        sources = [os.path.join(samples, f"photo-{i}.jpg") for i in (1, 2, 3)]
        for i in range(args.photos):
            run(["vips", "resize", sources[i % 3], os.path.join(photos, f"p{i:03}.jpg[Q=88]"), str(1.3 + (i % 7) * 0.12)])
        origin_port = free_port()
        origin = nginx_conf(work, "origin", origin_port, photos)
        wait_http(f"http://127.0.0.1:{origin_port}/p000.jpg")
        boxes = (200, 256, 320, 400, 480)
        pairs = [(f"p{i:03}.jpg", box) for i in range(args.photos) for box in boxes][: args.urls]
        source = lambda name: f"http://127.0.0.1:{origin_port}/{name}"
        from urllib.parse import quote
        ours_paths = [f"/thumbnail?url={quote(source(n), safe='')}&w={b}&h={b}&format=jpeg" for n, b in pairs]
        thumbor_paths = [f"/unsafe/fit-in/{b}x{b}/filters:format(jpeg):quality(90)/{source(n)}" for n, b in pairs]

        def start_ours(round_dir):
            port = free_port()
            config = os.path.join(round_dir, "server.json")
            with open(config, "w") as f:
                json.dump({"http": {"host": "127.0.0.1", "port": port},
                           "thumbnail": {"allowedHosts": [f"127.0.0.1:{origin_port}"], "defaultFormat": "jpeg"},
                           "loader": {"blockPrivateAddresses": True, "exemptAddresses": ["127.0.0.1/32"]},
                           "store": {"kind": "lmdb", "path": os.path.join(round_dir, "cache")}}, f)
            env = {**os.environ, "MALLOC_ARENA_MAX": "2", "LOG_LEVEL": "error"}
            process = subprocess.Popen([tool, "serve", "--config", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            wait_http(f"http://127.0.0.1:{port}/health")
            return process, f"http://127.0.0.1:{port}"

        def start_thumbor(round_dir):
            port = free_port()
            config = os.path.join(round_dir, "thumbor.conf")
            with open(config, "w") as f:
                f.write(f"""LOADER = 'thumbor.loaders.http_loader'
STORAGE = 'thumbor.storages.file_storage'
FILE_STORAGE_ROOT_PATH = '{round_dir}/storage'
RESULT_STORAGE = 'thumbor.result_storages.file_storage'
RESULT_STORAGE_FILE_STORAGE_ROOT_PATH = '{round_dir}/results'
RESULT_STORAGE_STORES_UNSAFE = True
ENGINE = 'thumbor.engines.pil'
ALLOW_UNSAFE_URL = True
QUALITY = 90
""")
            process = subprocess.Popen(["thumbor", "-i", "127.0.0.1", "-p", str(port), "-c", config, "--processes", "2", "-l", "error"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_http(f"http://127.0.0.1:{port}/healthcheck")
            return process, f"http://127.0.0.1:{port}"

        rows = {}
        def add(name, value, unit):
            rows.setdefault((name, unit), []).append(value)

        reference_dir = os.path.join(work, "reference")
        for round_index in range(args.rounds):
            for name, start, paths in (("webimage serve", start_ours, ours_paths), ("thumbor 7.8 (PIL, 2 processes)", start_thumbor, thumbor_paths)):
                round_dir = os.path.join(work, f"{name.split()[0]}-{round_index}")
                os.makedirs(round_dir)
                process, base = start(round_dir)
                try:
                    saved = {}
                    save = (lambda path, body: saved.__setitem__(path, body)) if name == "webimage serve" and round_index == 0 else None
                    rate, p50, p99 = cold_run(base, paths, 4, save)
                    add(f"{name}: cold", rate, "req/s")
                    add(f"{name}: cold p50", p50, "ms")
                    add(f"{name}: cold p99", p99, "ms")
                    rate, p50, p99 = warm_run(work, base, paths, args.seconds)
                    add(f"{name}: warm", rate, "req/s")
                    add(f"{name}: warm p50", p50, "ms")
                    add(f"{name}: warm p99", p99, "ms")
                    add(f"{name}: peak RSS, all processes", peak_rss_mib(process.pid), "MiB")
                    if saved:
                        os.makedirs(reference_dir, exist_ok=True)
                        for index, path in enumerate(ours_paths):
                            with open(os.path.join(reference_dir, f"t{index:04}.jpg"), "wb") as f:
                                f.write(saved[path])
                finally:
                    for pid in reversed(process_tree(process.pid)):
                        try:
                            os.kill(pid, 15)
                        except OSError:
                            pass
                    process.wait(timeout=60)
                shutil.rmtree(round_dir, ignore_errors=True)
            # The physical reference: nginx serving the finished thumbnails as files.
            port = free_port()
            reference = nginx_conf(work, f"reference-{round_index}", port, reference_dir)
            try:
                wait_http(f"http://127.0.0.1:{port}/t0000.jpg")
                rate, p50, p99 = warm_run(work, f"http://127.0.0.1:{port}", [f"/t{i:04}.jpg" for i in range(len(ours_paths))], args.seconds)
                add("nginx, the same thumbnails as files: warm", rate, "req/s")
                add("nginx, the same thumbnails as files: warm p50", p50, "ms")
                add("nginx, the same thumbnails as files: warm p99", p99, "ms")
            finally:
                reference.terminate()
                reference.wait()
            # The floor: a bare Hummingbird route answering the same bytes from a dictionary.
            listing = os.path.join(work, "floor.tsv")
            with open(listing, "w") as f:
                for index, path in enumerate(ours_paths):
                    f.write(f"{path}\t{os.path.join(reference_dir, f't{index:04}.jpg')}\n")
            port = free_port()
            floor = subprocess.Popen([floor_binary, str(port), listing], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_http(f"http://127.0.0.1:{port}/health")
                rate, p50, p99 = warm_run(work, f"http://127.0.0.1:{port}", ours_paths, args.seconds)
                add("hb-floor, the same bytes from a dictionary: warm", rate, "req/s")
                add("hb-floor, the same bytes from a dictionary: warm p50", p50, "ms")
                add("hb-floor, the same bytes from a dictionary: warm p99", p99, "ms")
            finally:
                floor.terminate()
                floor.wait()
        med = {name: statistics.median(values) for (name, _), values in rows.items()}
        ratios = {
            "webimage serve / thumbor, cold": med["webimage serve: cold"] / med["thumbor 7.8 (PIL, 2 processes): cold"],
            "webimage serve / thumbor, warm": med["webimage serve: warm"] / med["thumbor 7.8 (PIL, 2 processes): warm"],
            "webimage serve / nginx files, warm": med["webimage serve: warm"] / med["nginx, the same thumbnails as files: warm"],
            "webimage serve / hb-floor, warm": med["webimage serve: warm"] / med["hb-floor, the same bytes from a dictionary: warm"],
            "webimage serve / thumbor, peak RSS": med["webimage serve: peak RSS, all processes"] / med["thumbor 7.8 (PIL, 2 processes): peak RSS, all processes"],
        }
        report(f"Server: {len(pairs)} thumbnail URLs over {args.photos} photos from nginx on loopback; cold at concurrency 4, "
               f"warm with wrk (16 connections, {args.seconds} s), {args.rounds} rounds",
               [(name, values, unit) for (name, unit), values in rows.items()], "server",
               {"ratios": ratios, "urls": len(pairs), "photos": args.photos})
        targets = {"nginx": "at least 0.7x", "hb-floor": "at least 0.8x", "cold": "at least 3x", "thumbor, warm": "none (reported)", "RSS": "at most 1x"}
        for name, ratio in ratios.items():
            target = next(t for k, t in targets.items() if k in name)
            print(f"  ratio {name:<40} {ratio:.2f}x  (target: {target})")
    finally:
        if origin:
            origin.terminate()
            origin.wait()
        shutil.rmtree(work, ignore_errors=True)


def shared(args):
    """A shared-tier (Redis) hit through the manager against a C hiredis GET loop,
    and a local hit through a TieredCacheStore against the same LMDB store alone."""
    ensure_apt("gcc", "liblmdb-dev", "libhiredis-dev", "redis-server")
    bench = build_bench()
    redis_loop = compile_c("redis_get_loop", "-lhiredis")
    work = tempfile.mkdtemp(prefix="webimage-shared-")
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                               "--dir", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"redis://127.0.0.1:{port}"
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() == "PONG":
                break
            time.sleep(0.1)
        lmdb_dir = os.path.join(work, "lmdb")
        n, gets = str(args.entries), str(args.gets)
        run([bench, "store-fill", "redis", url, n, str(args.size), "8"])
        run([bench, "store-fill", "lmdb", lmdb_dir, n, str(args.size)])
        keys = os.path.join(work, "keys.txt")
        with open(keys, "w") as f:
            f.write(run([bench, "redis-keys", n]))
        scenarios = [
            ("C loop: hiredis GET + memcpy", [redis_loop, str(port), keys, gets]),
            ("RedisCacheStore.data(forKey:)", [bench, "store-get", "redis", url, n, gets]),
            ("ImageManager shared-tier hit (Redis, bytes)", [bench, "manager-hit", "redis", url, n, gets]),
            ("ImageManager disk hit (LMDB, bytes)", [bench, "manager-hit", "lmdb", lmdb_dir, n, gets]),
            ("ImageManager local hit (LMDB in a TieredCacheStore, bytes)", [bench, "manager-hit", "tiered", lmdb_dir + "|" + url, n, gets]),
        ]
        results = {name: [] for name, _ in scenarios}
        for _ in range(args.rounds):
            for name, cmd in scenarios:
                results[name].append(as_json(run(cmd))["nsPerGet"])
        rows = [(name, [v / 1000 for v in values], "µs/get") for name, values in results.items()]
        med = {name: statistics.median(v) for name, v in results.items()}
        ratios = {
            "Redis store / C hiredis GET": med["RedisCacheStore.data(forKey:)"] / med["C loop: hiredis GET + memcpy"],
            "Manager shared hit / C hiredis GET": med["ImageManager shared-tier hit (Redis, bytes)"] / med["C loop: hiredis GET + memcpy"],
            "Tiered local hit / LMDB alone": med["ImageManager local hit (LMDB in a TieredCacheStore, bytes)"] / med["ImageManager disk hit (LMDB, bytes)"],
        }
        report(f"Shared tier: {args.entries} entries of {args.size} bytes in Redis on loopback, {args.gets} random gets, {args.rounds} rounds interleaved",
               rows, "shared", {"ratios": ratios, "entries": args.entries, "size": args.size, "gets": args.gets})
        for name, ratio in ratios.items():
            target = "about 1x" if name.startswith("Tiered") else "within 2x"
            print(f"  ratio {name:<40} {ratio:.2f}x  (target: {target})")
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


def s3(args):
    """A bucket hit through the manager (S3CacheStore, bytes) against curl
    --aws-sigv4 fetching the same objects in one process (a connection reused,
    each request signed), from the same endpoint: moto's server with its access
    control on (Tests/Peers/moto_peer.py, from the venv `make s3-peer` makes)."""
    ensure_apt("curl")
    subprocess.run(["make", "-s", "-C", ROOT, "s3-peer"], check=True)
    bench = build_bench()
    python = os.path.join(ROOT, ".build", "s3-venv", "bin", "python3")
    peer = subprocess.Popen([python, os.path.join(ROOT, "Tests", "Peers", "moto_peer.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    work = tempfile.mkdtemp(prefix="webimage-s3-")
    try:
        moto = json.loads(peer.stdout.readline())
        key, secret = moto["full"]["accessKeyID"], moto["full"]["secretAccessKey"]
        env = {**os.environ, "S3_ENDPOINT": moto["endpoint"], "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}
        url = f"s3://{moto['bucket']}/bench/"
        n, gets = str(args.entries), args.gets
        run([bench, "store-fill", "s3", url, n, str(args.size), "8"], env=env)
        keys = run([bench, "s3-keys", url, n]).split()
        # The same random sequence of objects for both.
        import random
        chosen = [random.Random(7).choice(keys) for _ in range(gets)]
        config = os.path.join(work, "curl.conf")
        with open(config, "w") as f:
            for k in chosen:
                f.write(f'url = "{moto["endpoint"]}/{moto["bucket"]}/{k}"\noutput = "/dev/null"\n')
        curl = ["curl", "-s", "-f", "--aws-sigv4", "aws:amz:us-east-1:s3", "-u", f"{key}:{secret}",
                "-H", "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "--config", config]
        import resource

        def children_cpu():
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime

        wall = {"curl --aws-sigv4, one process": [], "ImageManager bucket hit (S3CacheStore, bytes)": []}
        cpu = {"curl CPU (process start included)": [], "webimage-bench CPU (start and 50 warm-up gets included)": []}
        for _ in range(args.rounds):
            before, started = children_cpu(), time.perf_counter()
            subprocess.run(curl, check=True)
            wall["curl --aws-sigv4, one process"].append((time.perf_counter() - started) / gets * 1e6)
            cpu["curl CPU (process start included)"].append((children_cpu() - before) / gets * 1e6)
            before = children_cpu()
            ns = as_json(run([bench, "manager-hit", "s3", url, n, str(gets)], env=env))["nsPerGet"]
            wall["ImageManager bucket hit (S3CacheStore, bytes)"].append(ns / 1000)
            cpu["webimage-bench CPU (start and 50 warm-up gets included)"].append((children_cpu() - before) / (gets + 50) * 1e6)
        rows = [(name, values, "µs/get") for name, values in wall.items()] + [(name, values, "µs CPU/get") for name, values in cpu.items()]
        med = {name: statistics.median(v) for name, v in {**wall, **cpu}.items()}
        ratio = med["curl --aws-sigv4, one process"] / med["ImageManager bucket hit (S3CacheStore, bytes)"]
        cpu_ratio = med["webimage-bench CPU (start and 50 warm-up gets included)"] / med["curl CPU (process start included)"]
        report(f"Bucket hits: {args.entries} entries of {args.size} bytes in moto on loopback, {gets} random gets, {args.rounds} rounds interleaved",
               rows, "s3", {"ratios": {"bucket hit speed / curl loop": ratio, "client CPU / curl CPU": cpu_ratio},
                            "entries": args.entries, "size": args.size, "gets": gets})
        print(f"  client CPU per get / curl's: {cpu_ratio:.2f}x")
        print(f"  bucket hit speed / curl loop: {ratio:.2f}x  (target: at least 0.9x)")
    finally:
        peer.stdin.close()
        peer.wait(timeout=30)
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
    for name, kind in (("thumbnails-12mp", "12 MP baseline"), ("thumbnails-12mp-progressive", "12 MP progressive"),
                       ("thumbnails-2mp", "2 MP baseline"), ("thumbnails-2mp-progressive", "2 MP progressive")):
        data = load(name)
        if data:
            speed = [r for r in data["rows"] if r["unit"] == "images/s"]
            memory = [dict(r, name=r["name"].replace(" (peak RSS)", "")) for r in data["rows"] if r["unit"] == "MiB"]
            fig, (a, b) = plt.subplots(1, 2, figsize=(12, 3.6))
            bars(a, speed, "images/s (higher is better)", f"Thumbnails, {kind} JPEGs: throughput")
            bars(b, memory, "MiB (lower is better)", f"Thumbnails, {kind} JPEGs: peak RSS")
            fig.tight_layout()
            fig.savefig(os.path.join(images, name + ".png"), dpi=110)
            written.append(name + ".png")
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
    thumbs.add_argument("--images", type=int, default=270, help="inputs per round (the issue measured 270: start-up costs amortised as a batch job sees them)")
    thumbs.add_argument("--progressive", action="store_true", help="progressive JPEG inputs (interlace)")
    thumbs.add_argument("--oriented", action="store_true", help="photos stored turned, with EXIF orientations 2 to 8 (as cameras write them)")
    thumbs.add_argument("--megapixels", type=int, choices=(2, 12), default=12, help="photo size: 1200x1800 or 4000x3000")
    scale = sub.add_parser("scaling")
    scale.add_argument("--rounds", type=int, default=3)
    scale.add_argument("--max-entries", type=int, default=1_000_000)
    scale.add_argument("--max-file-entries", type=int, default=100_000)
    scale.add_argument("--size", type=int, default=1024)
    scale.add_argument("--gets", type=int, default=20000)
    srv = sub.add_parser("server")
    srv.add_argument("--rounds", type=int, default=3)
    srv.add_argument("--photos", type=int, default=60)
    srv.add_argument("--urls", type=int, default=300)
    srv.add_argument("--seconds", type=int, default=10)
    sh = sub.add_parser("shared")
    sh.add_argument("--rounds", type=int, default=5)
    sh.add_argument("--entries", type=int, default=2000)
    sh.add_argument("--size", type=int, default=32768)
    sh.add_argument("--gets", type=int, default=20000)
    s3p = sub.add_parser("s3")
    s3p.add_argument("--rounds", type=int, default=5)
    s3p.add_argument("--entries", type=int, default=500)
    s3p.add_argument("--size", type=int, default=32768)
    s3p.add_argument("--gets", type=int, default=2000)
    enc = sub.add_parser("encoders")
    enc.add_argument("--rounds", type=int, default=3)
    enc.add_argument("--repeats", type=int, default=3)
    enc.add_argument("--quality", type=int, default=80)
    enc.add_argument("--photo", help="a photo to scale to 2400x1600 instead of the tool's synthetic sample")
    sub.add_parser("plots")
    args = parser.parse_args()
    {"cache-hits": cache_hits, "downloads": downloads, "thumbnails": thumbnails, "scaling": scaling, "server": server, "shared": shared, "s3": s3, "encoders": encoders, "plots": plots}[args.comparison](args)


if __name__ == "__main__":
    main()
