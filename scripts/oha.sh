#!/usr/bin/env bash
# scripts/oha.sh: oha, the HTTP load generator of the tile bench
# (docs/design-tiles.md section 6), pinned and cached like Martin.
#
#   scripts/oha.sh install   build oha 1.16.0 with `cargo install` (features:
#                            native-tls only) into
#                            ~/.cache/trafficdb/oha-1.16.0 if it is missing or
#                            not that version (10-30 min on 2 cores)
#   scripts/oha.sh path      print the binary's path (installs it first)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# One pinned version from crates.io, with its own Cargo.lock, and of its
# features only native-tls (OpenSSL, libssl-dev of scripts/deps.sh) instead of
# the default rustls over aws-lc-rs: with --no-default-features alone, 1.16.0
# does not compile (its client code uses the TLS stream unconditionally).
# Its rust-version (MSRV) is 1.88.
OHA_VERSION=1.16.0
OHA_MSRV=88
OHA_ROOT=${OHA_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/trafficdb/oha-$OHA_VERSION}
OHA_BIN=$OHA_ROOT/bin/oha

install_oha() {
	cargo_install_pinned oha "$OHA_VERSION" "$OHA_MSRV" "$OHA_ROOT" "10-30 min (27 min on a loaded machine)" \
		--no-default-features --features native-tls
}

case "${1:-}" in
install) install_oha ;;
path) install_oha; echo "$OHA_BIN" ;;
*) die "usage: scripts/oha.sh install | path" ;;
esac
