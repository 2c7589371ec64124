#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora, made here rather than stored: images come
from `webimage samples` (the directory given as the second argument) plus files
written byte by byte (GIFs with many frames, PNG and JPEG headers that claim huge
sizes, truncated files); text targets get the values users write.

    python3 Fuzz/seeds.py OUT SAMPLES_DIR
"""
import os
import shutil
import struct
import subprocess
import sys
import zlib


def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))


def png_header(width, height, idat=True):
    out = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0))
    if idat:
        out += chunk(b'IDAT', zlib.compress(b'\0' * 64))
    return out + chunk(b'IEND', b'')


def gif(frames, local_tables=False, trailer=True):
    out = bytearray(b'GIF89a' + struct.pack('<HH', 1, 1) + bytes([0x80, 0, 0, 0, 0, 0, 255, 255, 255]))
    out += bytes([0x21, 0xFF, 0x0B]) + b'NETSCAPE2.0' + bytes([3, 1, 0, 0, 0])
    for _ in range(frames):
        out += bytes([0x21, 0xF9, 4, 0, 10, 0, 0, 0, 0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0x80 if local_tables else 0])
        if local_tables:
            out += bytes([0, 0, 0, 255, 255, 255])
        out += bytes([2, 2, 0x44, 0x01, 0])
    if trailer:
        out += b';'
    return bytes(out)


def jpeg_header(width, height):
    sof = struct.pack('>BHHB', 8, height, width, 3) + b'\x01\x22\x00\x02\x11\x01\x03\x11\x01'
    return b'\xff\xd8' + b'\xff\xe0' + struct.pack('>H', 16) + b'JFIF\0\x01\x01\0\0\x01\0\x01\0\0' \
        + b'\xff\xc0' + struct.pack('>H', len(sof) + 2) + sof + b'\xff\xd9'


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    out, samples = sys.argv[1], sys.argv[2]
    images = {}
    for name in sorted(os.listdir(samples)):
        with open(os.path.join(samples, name), 'rb') as f:
            images[name] = f.read()
    crafted = {
        'huge.png': png_header(100000, 100000), 'no-idat.png': png_header(10, 10, idat=False),
        'gif-300.gif': gif(300), 'gif-local.gif': gif(3, local_tables=True), 'gif-cut.gif': gif(5, trailer=False),
        'huge.jpg': jpeg_header(65000, 65000), 'webp-header.webp': b'RIFF\x10\0\0\0WEBPVP8 ',
    }
    for target in ('sniff', 'header'):
        for name, data in {**crafted, **{k: v[:4096] for k, v in images.items()}}.items():
            write(os.path.join(out, target), name, data)
    # The decoder gets whole small images and their truncations.
    for name, data in {**crafted, **images}.items():
        if len(data) <= 200_000:
            write(os.path.join(out, 'decode'), name, data)
            write(os.path.join(out, 'decode'), 'cut-' + name, data[: len(data) // 2])
            if name.endswith('.jpg'):
                write(os.path.join(out, 'turbojpeg'), name, data)
                write(os.path.join(out, 'turbojpeg'), 'cut-' + name, data[: len(data) // 2])
    # Progressive versions for the DC decoder (4:2:0 with restart markers, and
    # 4:4:4), made with libvips' command line tool (libvips-tools, in make deps).
    if shutil.which('vips'):
        for index, (source, options) in enumerate([('oriented-1.jpg', 'Q=75,interlace,restart_interval=2'),
                                                    ('oriented-6.jpg', 'Q=92,interlace')]):
            target = os.path.join(out, 'turbojpeg', f'progressive-{index}.jpg')
            subprocess.run(['vips', 'copy', os.path.join(samples, source), f'{target}[{options}]'], check=True)
            with open(target, 'rb') as f:
                data = f.read()
            write(os.path.join(out, 'turbojpeg'), f'cut-progressive-{index}.jpg', data[: len(data) // 3])
    config = ['1048576', '512KB', '64MiB', '1GB', '2GiB', '30s', '10m', '500ms', '7d', '1.5h', '-1', 'forever',
              '10.0.0.0/8', 'fd00::/8', '127.0.0.1', '::ffff:10.0.0.1/104', '256x256', '640', '0x0',
              'resize:256x256:fill', 'crop:0,0,10,10;rotate:90', 'flip:h;round:8;blur:2.5', 'tint:255,0,0,0.5',
              'store.kind', 'store.maxSise', 'loader.exemptAddresses']
    for index, text in enumerate(config):
        write(os.path.join(out, 'config'), f'{index:02}', text)
    # Transform specs: the hostile ones (canvas growth, many steps, the service's limits) and ordinary ones.
    transforms = ['rotate:45;rotate:45;rotate:45;rotate:45;rotate:45;rotate:45;rotate:45;rotate:45', 'pad:512x512',
                  'pad:512x512:none;round:200', 'resize:512x512:stretch;blur:100', 'dpr:5;resize:100x100;sharpen:10',
                  'crop:0,0,10,10;rotate:90', 'resize:256x256:fill:attention', 'flip:v;tint:255,0,0,0.5;grey;trim:25',
                  'flatten:000000;pad:300x300:ffffff:ne', 'rotate:-12.5;flatten',
                  'brightness:1.5;contrast:0.2;saturation:10;gamma:0.1', 'dpr:5;pixelate:512', 'pad:512x512:none;pixelate:3;gamma:10',
                  'text:<b>&amp;</b>:256:ff0000:1:nw', 'dpr:5;text:' + 'W' * 100 + ':256']
    for index, text in enumerate(transforms):
        write(os.path.join(out, 'transform'), f'{index:02}', text)
    # SVGs for the sanitiser: scripts, links, CSS, entities, CDATA, broken markup.
    svgs = ['<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>x()</script><rect onload="y()" width="10" height="10"/></svg>',
            '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "b">]><svg>&a;</svg>',
            '<svg><style><![CDATA[@import url(http://x/); .a{fill:url(#g)}]]></style><image xlink:href="http://x/y.png"/><use href="#g"/></svg>',
            '<svg><text>&amp;&#x41;&evil;&lt;</text><image href="data:image/png;base64,AAAA"/></svg>', '<svg><rect></svg>']
    for index, text in enumerate(svgs):
        write(os.path.join(out, 'svg'), f'{index:02}', text)
    keys = ['https://example.com/photo@2x.jpg', 'https://h/a%402x.png?X-Amz-Signature=abc&w=1', 'file:///tmp/a@3x.gif',
            'http://h/dl/..%2F..%2Fowned.jpg', 'http://h/%2E%2E', 'http://h/a%00b.png', 'http://[::1]:8080/x.webp#frag',
            'test://host/a.timg#webimage(t=half)']
    for index, text in enumerate(keys):
        write(os.path.join(out, 'cachekey'), f'{index:02}', text)
    # Accept headers browsers send, hashes from the reference implementations' docs, colours.
    negotiate = ['image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8',
                 'image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5',
                 'image/avif;q=0,image/webp;q=0.9', '*/*', 'LEHV6nWB2yk8pyo0adR*.7kCMdnj', '00G[xz', '#fff', '255,0,0']
    for index, text in enumerate(negotiate):
        write(os.path.join(out, 'negotiate'), f'{index:02}', text)
    write(os.path.join(out, 'negotiate'), 'thumbhash', bytes([0x5E, 0x08, 0x06, 0x25, 0x82, 0x77, 0x70, 0x78, 0x86, 0x88, 0x78, 0x87, 0x07, 0x88]))

    # What an S3 endpoint answers (error documents, a listing page) and s3:// URLs.
    s3 = ['<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature &amp; more</Message></Error>',
          '<Error><Code>PermanentRedirect</Code><Region>eu-west-1</Region></Error>',
          '<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>v1/ab&#x41;c</Key><Size>120</Size></Contents>'
          '<Contents><Key>v1/&lt;x&gt;</Key><Size>-5</Size></Contents></ListBucketResult>',
          's3://photos/2026/a%20b+c.jpg', 's3://my.bucket/k%C3%A9y', 's3://b/%FF', '\x03120']
    for index, text in enumerate(s3):
        write(os.path.join(out, 's3'), f'{index:02}', text)


if __name__ == '__main__':
    main()
