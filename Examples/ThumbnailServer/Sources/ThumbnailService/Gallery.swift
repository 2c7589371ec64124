import Foundation
import Hummingbird
import NIOCore

extension ThumbnailService {
    /// The gallery: a grid of thumbnails of ``gallerySources``, each captioned with
    /// where it came from (network, disk, memory) and how long the service took,
    /// read from the `Server-Timing` header through the Resource Timing API.
    /// Each `<img>` gets `data-state="loaded"` or `"failed"` when it settles, and
    /// `#status` counts them, which is what the browser test reads.
    func galleryPage() -> Response {
        let size = settings.gallerySize
        let figures = gallerySources.map { source -> String in
            let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
            let url = source.absoluteString.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
            let unsigned = "/thumbnail?url=\(url)&w=\(size)&h=\(size)"
            let src = settings.signer?.sign(unsigned) ?? unsigned
            let name = source.lastPathComponent.isEmpty ? source.absoluteString : source.lastPathComponent
            return """
                <figure>
                  <a href="\(escape(src))"><img src="\(escape(src))" alt="\(escape(name))" width="\(size)" height="\(size)"></a>
                  <figcaption><span class="name" title="\(escape(source.absoluteString))">\(escape(name))</span>
                  <span class="info">loading…</span></figcaption>
                </figure>
            """
        }
        let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <title>swift-web-image thumbnails</title>
        <style>
          body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; background: #f6f6f4; color: #222; }
          h1 { font-size: 20px; margin: 0 0 4px; }
          p { margin: 0 0 16px; color: #555; }
          main { display: grid; grid-template-columns: repeat(auto-fill, minmax(\(size + 16)px, 1fr)); gap: 16px; }
          figure { margin: 0; padding: 8px; background: #fff; border-radius: 6px; box-shadow: 0 1px 3px #0002; }
          img { display: block; width: \(size)px; height: \(size)px; object-fit: contain;
                background: repeating-conic-gradient(#eee 0 25%, #fff 0 50%) 0 0 / 16px 16px; }
          figcaption { margin-top: 6px; display: flex; flex-direction: column; }
          .name { font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
          .info { color: #666; font-variant-numeric: tabular-nums; }
          figure:has(img[data-state=failed]) .info { color: #b00; }
        </style>
        </head>
        <body>
        <h1>Thumbnails</h1>
        <p>\(gallerySources.count) images, fitted in \(size)×\(size) px and served as WebP by
        <code>/thumbnail</code>. Reload the page: the second time they come from memory.
        <span id="status" data-total="\(gallerySources.count)" data-loaded="0" data-failed="0"></span></p>
        <main>
        \(figures.joined(separator: "\n"))
        </main>
        <script>
        const status = document.getElementById('status');
        function settle(img, ok) {
          img.dataset.state = ok ? 'loaded' : 'failed';
          const key = ok ? 'loaded' : 'failed';
          status.dataset[key] = String(Number(status.dataset[key]) + 1);
          const info = img.closest('figure').querySelector('.info');
          if (!ok) { info.textContent = 'failed to load'; return; }
          const entry = performance.getEntriesByName(img.currentSrc).pop();
          const timing = entry && entry.serverTiming && entry.serverTiming[0];
          const size = img.naturalWidth + '×' + img.naturalHeight;
          info.textContent = timing ? `${timing.name} · ${timing.duration.toFixed(1)} ms · ${size}` : size;
        }
        for (const img of document.querySelectorAll('main img')) {
          if (img.complete && img.naturalWidth > 0) settle(img, true);
          else if (img.complete) settle(img, false);
          else {
            img.addEventListener('load', () => settle(img, img.naturalWidth > 0));
            img.addEventListener('error', () => settle(img, false));
          }
        }
        </script>
        </body>
        </html>
        """
        return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                        body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }

    private func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
