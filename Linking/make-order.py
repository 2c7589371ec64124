#!/usr/bin/env python3
"""Writes Linking/webimage.order, the functions a thumbnail batch and the README's
cache job execute in the release `webimage` tool, which Package.swift passes to
lld (`--symbol-ordering-file`) so that they sit together in the binary.

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

        functions = set()
        for p in profiles:
            functions |= executed_functions(p, "webimage-profiled")
        defined = set()
        for line in subprocess.run(["nm", "--defined-only", tool], check=True, capture_output=True, text=True).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tTwW":
                defined.add(parts[2])
        # callgrind names a function entered twice by different paths "name'2".
        functions = {re.sub(r"'\d+$", "", f) for f in functions}
        hot = sorted(f for f in functions if f in defined)
        with open(ORDER, "w") as f:
            f.write("# The functions a thumbnail batch and the README's cache job run in the release\n"
                    "# `webimage` tool, for lld's --symbol-ordering-file (Package.swift). Written by\n"
                    "# `make link-order` (Linking/make-order.py); a stale line is skipped, never wrong.\n")
            f.write("\n".join(hot) + "\n")
        print(f"{ORDER}: {len(hot)} functions")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
