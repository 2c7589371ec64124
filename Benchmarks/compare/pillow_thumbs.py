"""Peer: Pillow thumbnails with a process pool. Usage: pillow_thumbs.py OUTDIR PROCESSES FILE..."""
import os, sys
from multiprocessing import Pool
from PIL import Image, ImageOps


def thumb(args):
    path, out = args
    with Image.open(path) as image:
        image.draft("RGB", (256, 256))          # JPEG DCT scaling: shrink on load
        image = ImageOps.exif_transpose(image)  # orientation applied, as the others do
        image.thumbnail((256, 256), Image.LANCZOS)
        image.save(os.path.join(out, os.path.basename(path)), "JPEG", quality=85)


if __name__ == "__main__":
    out, processes, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    with Pool(processes) as pool:
        pool.map(thumb, [(f, out) for f in files], chunksize=1)
