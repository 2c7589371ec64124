#!/usr/bin/env python3
"""Writes Linking/webimage.order, the functions a thumbnail batch and the README's
cache job execute in the release `webimage` tool, then those `webimage serve`
adds, which Package.swift passes to lld (`--symbol-ordering-file`) so that they
sit together in the binary.

Why: the kernel maps a binary's code 64 KiB around each page a process touches
(fault-around), so a few thousand hot functions scattered over 25 MB of code kept
about 12 MB of it resident, where the functions themselves are about 1 MB.
Packed together they fit in a few hundred pages. Measured in docs/performance.md
("How the tool is linked").

Run `make link-order` after changes that move the batch's code (new modules on
its path, renamed types); a stale entry is skipped by the linker, and the tool
is only larger in memory, never wrong. Needs valgrind (callgrind lists every
function executed) and the `vips` command to make photo-sized inputs.
"""
import os, re, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORDER = os.path.join(ROOT, "Linking", "webimage.order")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def executed_functions(profile, binary_name):
    """Names of the functions callgrind saw executing in `binary_name`."""
    objects, names, current, found = {}, {}, None, set()
    for line in open(profile):
        line = line.strip()
        m = re.match(r"^(c?ob)=\((\d+)\)(?: (.*))?$", line)
        if m:
            if m.group(3):
                objects[m.group(2)] = m.group(3)
            if m.group(1) == "ob":
                current = objects[m.group(2)]
            continue
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line)
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3)
            if m.group(1) == "fn" and current and current.endswith(binary_name):
                found.add(names[m.group(2)])
    return found


def profile_serve(tool, photos, work, profiles):
    """`webimage serve` under callgrind, over what a service sees: cold thumbnails of
    the photos in each output format, fit and fill, memory and disk hits, a 304,
    HEAD, /info, /placeholder, /health, /metrics, an origin's 404 and a bad query;
    then SIGTERM, on which it stops cleanly and callgrind writes its profile."""
    import json, signal, socket, time, urllib.error, urllib.parse, urllib.request

    def free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    origin_port, port = free_port(), free_port()
    origin = subprocess.Popen([sys.executable, "-m", "http.server", str(origin_port), "--bind", "127.0.0.1", "--directory", photos],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config = os.path.join(work, "serve.json")
    with open(config, "w") as f:
        json.dump({"http": {"host": "127.0.0.1", "port": port},
                   "thumbnail": {"allowedHosts": [f"127.0.0.1:{origin_port}"]},
                   "loader": {"exemptAddresses": ["127.0.0.1/32"]},
                   "store": {"kind": "lmdb", "path": os.path.join(work, "serve-cache")}}, f)
    out = os.path.join(work, "callgrind.serve")
    # The system allocator: serve would otherwise re-execute itself onto jemalloc,
    # out of callgrind's sight.
    env = dict(os.environ, WEBIMAGE_ALLOCATOR="system", LOG_LEVEL="error")
    server = subprocess.Popen(["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}", tool, "serve", "--config", config],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    base = f"http://127.0.0.1:{port}"

    def get(path, headers=None, method="GET"):
        request = urllib.request.Request(base + path, headers=headers or {}, method=method)
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()

    try:
        for _ in range(1200):
            try:
                if get("/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError("serve under callgrind did not answer /health")
        names = sorted(os.listdir(photos))[:4]
        url = lambda name: urllib.parse.quote(f"http://127.0.0.1:{origin_port}/{name}", safe="")
        for name in names:
            for query in ("w=200&h=200", "w=480&h=480&format=webp", "w=256&h=256&fit=fill&format=jpeg"):
                get(f"/thumbnail?url={url(name)}&{query}")
        status, headers, _ = get(f"/thumbnail?url={url(names[0])}&w=200&h=200", {"Accept": "image/avif,image/webp,*/*"})
        get(f"/thumbnail?url={url(names[0])}&w=200&h=200&format=avif")
        get(f"/thumbnail?url={url(names[0])}&w=120&format=png")
        for _ in range(20):  # memory hits
            status, headers, _ = get(f"/thumbnail?url={url(names[1])}&w=200&h=200")
        get(f"/thumbnail?url={url(names[1])}&w=200&h=200", {"If-None-Match": headers.get("ETag", "")})
        get(f"/thumbnail?url={url(names[1])}&w=200&h=200", method="HEAD")
        get(f"/info?url={url(names[2])}")
        get(f"/placeholder?url={url(names[3])}")
        get(f"/thumbnail?url={url('missing.jpg')}&w=100")
        get(f"/thumbnail?url={url(names[0])}&w=-1")
        get("/metrics")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=600)
        origin.terminate()
        origin.wait()
    profiles.append(out)


def main():
    run(["swift", "build", "-c", "release", "--product", "webimage"], cwd=ROOT)
    bin_path = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
    work = tempfile.mkdtemp(prefix="webimage-order-")
    try:
        # valgrind 3.19 cannot read the DWARF 5 of a Swift 6 build: profile a copy
        # without debug information (the symbol table stays).
        tool = os.path.join(work, "webimage-profiled")
        shutil.copy(os.path.join(bin_path, "webimage"), tool)
        run(["strip", "--strip-debug", tool])
        samples = os.path.join(work, "samples")
        run([tool, "samples", samples], stdout=subprocess.DEVNULL)
        photos = os.path.join(work, "photos")
        os.makedirs(photos)
        # 2 MP and 12 MP photos, baseline and progressive: the 1/4 libjpeg path
        # and the DC decoder, as compare.py's thumbnail sets.
        for i, (width, height, options) in enumerate([(1200, 1800, "Q=90"), (1200, 1800, "Q=90,interlace"),
                                                      (4000, 3000, "Q=90"), (4000, 3000, "Q=90,interlace")]):
            for source in (1, 2):
                target = os.path.join(photos, f"p{i}{source}.jpg[{options}]")
                run(["vips", "thumbnail", os.path.join(samples, f"photo-{source}.jpg"), target, str(width),
                     "--height", str(height), "--size", "force"])
        profiles = []

        def profile(name, args, env=None):
            out = os.path.join(work, f"callgrind.{name}")
            run(["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}", tool, *args],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            profiles.append(out)

        inputs = sorted(os.path.join(photos, f) for f in os.listdir(photos))
        profile("thumbnails", ["load", "--thumbnail", "256x256", "--format", "jpeg", "--quality", "85",
                               "--out", os.path.join(work, "thumbs"), "--store", "none", "--quiet", "--concurrency", "4", *inputs])
        # The README's job: the samples into the default LMDB cache, twice.
        env = dict(os.environ, HOME=os.path.join(work, "home"))
        sample_files = sorted(os.path.join(samples, f) for f in os.listdir(samples))
        profile("cache-first", ["load", *sample_files], env)
        profile("cache-second", ["load", *sample_files], env)

        batch_profiles = list(profiles)
        profile_serve(tool, photos, work, profiles)

        def executed(paths):
            found = set()
            for p in paths:
                found |= executed_functions(p, "webimage-profiled")
            # callgrind names a function entered twice by different paths "name'2".
            return {re.sub(r"'\d+$", "", f) for f in found}
        defined = set()
        for line in subprocess.run(["nm", "--defined-only", tool], check=True, capture_output=True, text=True).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tTwW":
                defined.add(parts[2])
        batch = executed(batch_profiles) & defined
        serve = (executed(profiles) & defined) - batch
        # The batch's functions first, then the rest of what serve runs: each set
        # packed, so that a batch maps none of serve's pages.
        hot = sorted(batch) + sorted(serve)
        with open(ORDER, "w") as f:
            f.write("# The functions a thumbnail batch and the README's cache job run in the release\n"
                    "# `webimage` tool, then those `webimage serve` adds, for lld's\n"
                    "# --symbol-ordering-file (Package.swift). Written by `make link-order`\n"
                    "# (Linking/make-order.py); a stale line is skipped, never wrong.\n")
            f.write("\n".join(hot) + "\n")
        print(f"{ORDER}: {len(batch)} batch functions, then {len(serve)} more of serve's")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
