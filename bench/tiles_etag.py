"""bench/tiles_etag.py: the 304 check of bench/tiles.sh (make bench-tiles).

    python3 bench/tiles_etag.py fetch URL_FILE ETAG_FILE
    python3 bench/tiles_etag.py refetch ETAG_FILE

fetch: GETs each URL of URL_FILE (one a line, on 127.0.0.1, one keep-alive
connection) and writes "URL<TAB>ETag" lines to ETAG_FILE; every answer must
be 200 or 204 (an empty tile) with an ETag.
refetch: GETs each URL again with If-None-Match: its ETag, and prints
"URL<TAB>status" lines (304, or 200/204 when the tile changed).
"""

import http.client
import sys
import urllib.parse


def connect(url):
    u = urllib.parse.urlsplit(url)
    if u.hostname not in ("127.0.0.1", "localhost"):
        sys.exit(f"{url}: only a server on 127.0.0.1 is measured")
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30), u


def get(conn, u, headers):
    conn.request("GET", u.path, headers=headers)
    r = conn.getresponse()
    r.read()
    return r.status, r.getheader("etag")


def main():
    mode, *args = sys.argv[1:]
    if mode == "fetch":
        urls = [line.strip() for line in open(args[0]) if line.strip()]
        conn, _ = connect(urls[0])
        with open(args[1], "w") as out:
            for url in urls:
                status, etag = get(conn, urllib.parse.urlsplit(url), {})
                if status not in (200, 204) or not etag:
                    sys.exit(f"{url}: HTTP {status}, ETag {etag!r}")
                out.write(f"{url}\t{etag}\n")
    elif mode == "refetch":
        rows = [line.rstrip("\n").split("\t") for line in open(args[0]) if line.strip()]
        conn, _ = connect(rows[0][0])
        for url, etag in rows:
            status, _ = get(conn, urllib.parse.urlsplit(url), {"If-None-Match": etag})
            print(f"{url}\t{status}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
