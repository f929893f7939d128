# scripts/docs_hooks.py: MkDocs hooks for `make docs` (mkdocs.yml's hooks:): the
# site opens on Home.
#
# The site is built from .docs-build/, a mirror of the repository's layout (so
# the pages' GitHub-style links such as ../bench/results/x.md resolve), where
# README.md would be the root page and docs/index.md would be /docs/.  This
# hook only moves their output: docs/index.md becomes the site's index.html and
# README.md becomes /readme/.  MkDocs resolves links by source file and writes
# each one relative to the page's final URL, so the links need no rewriting.
MOVES = {"docs/index.md": "index.html", "README.md": "readme/index.html"}


def on_files(files, config):
    for f in files:
        if f.src_uri in MOVES:
            f.dest_uri = MOVES[f.src_uri]
            # url and abs_dest_path are cached from dest_uri: recompute them
            for cached in ("url", "abs_dest_path"):
                f.__dict__.pop(cached, None)
    return files
