#!/usr/bin/env python3
"""Decoder conformance through every door: `webimage info`, `webimage load` and
`webimage serve`, over a tree of image files, each checked against what it must do.

    python3 Tests/Conformance/run.py --tool .build/release/webimage DIR

Expectations come from DIR/manifest.json when present ({"relative/path": {"refused":
bool, "size": [w, h], "frames": n, "reference": "relative.png", "maxMeanDiff": x}}),
and otherwise from the rules of the suites it knows by folder name (the README of
../shared/corpus/conformance gives them):

- pngsuite/: files whose name starts with x are corrupt and must be refused; every
  other file decodes at 32x32, sNN files at NNxNN, the cd* pHYs files at their sizes.
- webp/: every file decodes at the size its RIFF header gives, animations with
  their ANMF frame count.
- avif/: every file decodes; kimono*.avif show the original (kimono.png) once their
  irot/imir are applied, the crops show kimono.crop.png; star-*.avifs have 5 frames.

`info` reads headers only, so a file whose damage is in its pixel data passes it;
refusals are judged by `load` and `serve`, which decode. Prints each failure and one
summary line; exits 1 on any failure. Needs the `vips` command (libvips-tools) for
pixel differences.
"""
import argparse
import http.server
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

CRASH_MARKS = ("Fatal error", "Program crashed", "Signal 4", "Segmentation fault", "VIPS-WARNING", "(process:")


def png_rules(name):
    expected = {"refused": name.startswith("x")}
    if not expected["refused"]:
        sizes = {"cdfn": (8, 32), "cdhn": (32, 8), "cdsn": (8, 8)}
        match = re.match(r"s(\d\d)", name)
        expected["size"] = sizes.get(name[:4]) or ((int(match.group(1)),) * 2 if match else (32, 32))
        expected["frames"] = 1
    return expected


def webp_rules(path):
    data = open(path, "rb").read()
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return {"refused": True}
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
    elif chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        width, height = 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    else:
        width = int.from_bytes(data[26:28], "little") & 0x3FFF
        height = int.from_bytes(data[28:30], "little") & 0x3FFF
    frames = data.count(b"ANMF") if chunk == b"VP8X" and data[20] & 0x02 else 1
    return {"refused": False, "size": (width, height), "frames": max(1, frames)}


def avif_rules(name):
    expected = {"refused": False}
    if name.startswith("kimono"):
        # Lossy: avifdec's own decode of kimono.avif is 3.15 levels from kimono.png.
        expected["reference"] = "kimono.crop.png" if ".crop" in name else "kimono.png"
        expected["maxMeanDiff"] = 4.0
        expected["frames"] = 1
    if name.endswith(".avifs"):
        expected["frames"] = 5
    return expected


def expectations(root):
    manifest_path = os.path.join(root, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    found = {}
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root)
            suite = relative.split(os.sep)[0]
            if relative in manifest:
                found[relative] = manifest[relative]
            elif suite == "pngsuite" and name.endswith(".png"):
                found[relative] = png_rules(name)
            elif suite == "webp" and name.endswith(".webp"):
                found[relative] = webp_rules(path)
            elif suite == "avif" and (name.endswith(".avif") or name.endswith(".avifs")):
                found[relative] = avif_rules(name)
            if relative in found and "reference" in found[relative]:
                found[relative]["reference"] = os.path.join(os.path.dirname(path), found[relative]["reference"])
    return found


def mean_difference(ours, reference, work):
    """Mean absolute difference per band (0-255) over the colour bands, by libvips."""
    def three(path, name):
        out = os.path.join(work, name + ".v")
        bands = int(subprocess.run(["vipsheader", "-f", "bands", path], capture_output=True, text=True).stdout.strip() or 3)
        if bands >= 3:
            subprocess.run(["vips", "extract_band", path, out, "0", "--n", "3"], check=True, capture_output=True)
        else:
            subprocess.run(["vips", "bandjoin", f"{path} {path} {path}", out], check=True, capture_output=True)
        return out
    a, b = three(ours, "a"), three(reference, "b")
    diff, absolute = os.path.join(work, "d.v"), os.path.join(work, "abs.v")
    subprocess.run(["vips", "subtract", a, b, diff], check=True, capture_output=True)
    subprocess.run(["vips", "abs", diff, absolute], check=True, capture_output=True)
    return float(subprocess.run(["vips", "avg", absolute], check=True, capture_output=True, text=True).stdout.strip())


def crashed(text):
    return next((mark for mark in CRASH_MARKS if mark in text), None)


class Doors:
    def __init__(self, tool, root, work):
        self.tool, self.root, self.work = tool, root, work
        self.env = dict(os.environ, HOME=work, XDG_CACHE_HOME=work)

    def run(self, arguments):
        return subprocess.run([self.tool] + arguments, capture_output=True, text=True, timeout=120, env=self.env)

    def info(self, path):
        result = self.run(["info", "--store", "none", path, "--json"])
        if result.returncode != 0:
            return {"refused": True, "status": result.returncode, "stderr": result.stderr}
        info = json.loads(result.stdout)
        return {"refused": False, "size": (info["pixelWidth"], info["pixelHeight"]), "frames": info["frameCount"], "stderr": result.stderr}

    def load(self, path, out):
        # A box no image exceeds: decoded at its own size, written as PNG (first frame).
        result = self.run(["load", "--store", "none", path, "--thumbnail", "65535", "--format", "png", "--out", out, "--json"])
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        record = json.loads(lines[-1]) if lines else {}
        if result.returncode != 0 or record.get("error"):
            return {"refused": True, "status": result.returncode, "stderr": result.stderr}
        written = [os.path.join(out, name) for name in os.listdir(out)]
        return {"refused": False, "size": (record.get("pixelWidth"), record.get("pixelHeight")), "frames": record.get("frameCount"),
                "file": written[0] if written else None, "stderr": result.stderr}


class Service:
    """`webimage serve` over an HTTP origin on loopback that serves the tree."""

    def __init__(self, tool, root, work):
        handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=root, **k)
        http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
        self.origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.origin.serve_forever, daemon=True).start()
        self.log = open(os.path.join(work, "serve.log"), "w+")
        self.process = subprocess.Popen([tool, "serve", "--store", "none", "--set", "http.port=0",
                                         "--set", "thumbnail.allowedHosts=127.0.0.1", "--set", "loader.exemptAddresses=127.0.0.1/32",
                                         "--set", "thumbnail.maxDimension=4096"],
                                        stdout=subprocess.PIPE, stderr=self.log, text=True, env=dict(os.environ, HOME=work, XDG_CACHE_HOME=work))
        self.port = None
        deadline = time.time() + 120
        while self.port is None and time.time() < deadline:
            line = self.process.stdout.readline()
            if not line and self.process.poll() is not None:
                raise SystemExit(f"serve exited with {self.process.returncode}")
            match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if match:
                self.port = int(match.group(1))
        if self.port is None:
            raise SystemExit("serve did not say where it listens")

    def get(self, route, relative, extra=""):
        source = f"http://127.0.0.1:{self.origin.server_address[1]}/{urllib.parse.quote(relative)}"
        url = f"http://127.0.0.1:{self.port}/{route}?url={urllib.parse.quote(source, safe='')}{extra}"
        try:
            with urllib.request.urlopen(url, timeout=120) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def check(self, relative):
        status, body = self.get("thumbnail", relative, "&w=64&h=64")
        if status != 200:
            return {"refused": True, "status": status, "body": body[:300].decode("utf-8", "replace")}
        status, body = self.get("info", relative)
        if status != 200:
            return {"refused": False, "status": status, "body": body[:300].decode("utf-8", "replace"), "infoFailed": True}
        info = json.loads(body)
        return {"refused": False, "size": (info.get("pixelWidth"), info.get("pixelHeight")), "frames": info.get("frameCount"), "status": status}

    def healthy(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=30) as response:
                return response.status == 200
        except Exception:
            return False

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.origin.shutdown()


def judge(relative, door, expected, got, failures):
    def fail(what):
        failures.append(f"{door:5} {relative}: {what}")
    text = got.get("stderr", "") + got.get("body", "")
    mark = crashed(text)
    if mark or got.get("status", 0) not in (0, 1, 2, 200, 400, 403, 404, 413, 415, 422):
        fail(f"crashed or answered {got.get('status')} ({mark or 'status'}): {text[-300:]}")
        return
    if expected.get("refused"):
        if not got["refused"] and door != "info":
            fail("accepted a file that must be refused")
        return
    if got["refused"]:
        fail(f"refused: {text.strip()[-300:]}")
        return
    if "size" in expected and tuple(got["size"]) != tuple(expected["size"]) and not got.get("infoFailed"):
        fail(f"size {got['size'][0]}x{got['size'][1]}, expected {expected['size'][0]}x{expected['size'][1]}")
    if "frames" in expected and got.get("frames") != expected["frames"] and not got.get("infoFailed"):
        fail(f"{got.get('frames')} frames, expected {expected['frames']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tool", required=True)
    parser.add_argument("--doors", default="info,load,serve")
    parser.add_argument("root")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    doors = args.doors.split(",")
    files = expectations(root)
    failures = []
    checks = 0
    with tempfile.TemporaryDirectory(prefix="webimage-conformance-") as work:
        tool = Doors(os.path.abspath(args.tool), root, work)
        service = Service(os.path.abspath(args.tool), root, work) if "serve" in doors else None
        try:
            for relative, expected in files.items():
                path = os.path.join(root, relative)
                if "info" in doors:
                    judge(relative, "info", expected, tool.info(path), failures)
                    checks += 1
                if "load" in doors:
                    out = tempfile.mkdtemp(dir=work)
                    got = tool.load(path, out)
                    judge(relative, "load", expected, got, failures)
                    checks += 1
                    if "reference" in expected and not got["refused"] and got.get("file"):
                        difference = mean_difference(got["file"], expected["reference"], work)
                        if difference > expected.get("maxMeanDiff", 2.0):
                            failures.append(f"load  {relative}: mean difference {difference:.2f} from {os.path.basename(expected['reference'])}, "
                                            f"over {expected.get('maxMeanDiff', 2.0)}")
                if service:
                    judge(relative, "serve", expected, service.check(relative), failures)
                    checks += 1
            if service and not service.healthy():
                failures.append("serve /health did not answer 200 after the run")
        finally:
            if service:
                service.stop()
                service.log.seek(0)
                mark = crashed(service.log.read())
                if mark:
                    failures.append(f"serve's log shows {mark!r}")
    for failure in failures:
        print(failure)
    refused = sum(1 for e in files.values() if e.get("refused"))
    print(f"conformance: {len(files)} files ({refused} to refuse), {checks} checks through {', '.join(doors)}: "
          f"{len(failures)} failure{'s' if len(failures) != 1 else ''}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
