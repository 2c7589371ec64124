"""Peer: pyvips thumbnails. Usage: pyvips_thumbs.py OUTDIR FILE..."""
import os, sys
import pyvips

out, files = sys.argv[1], sys.argv[2:]
for path in files:
    pyvips.Image.thumbnail(path, 256, height=256).write_to_file(os.path.join(out, os.path.basename(path)), Q=85)
