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

installed() { [ -x "$OHA_BIN" ] && [ "$("$OHA_BIN" --version 2>/dev/null)" = "oha $OHA_VERSION" ]; }

install_oha() {
	installed && return 0
	local cargo force=() t0=$SECONDS
	cargo=$(cargo_cmd "$OHA_MSRV" oha)
	[ -e "$OHA_BIN" ] && force=(--force)
	mkdir -p "$OHA_ROOT"
	echo "oha: building oha $OHA_VERSION with $("$cargo" --version) into $OHA_ROOT" >&2
	echo "oha: this takes 10-30 min on 2 cores the first time (27 min on a loaded one); cargo prints each crate it compiles" >&2
	PATH=$(dirname "$cargo"):$PATH nice "$cargo" install "oha@$OHA_VERSION" --locked \
		--no-default-features --features native-tls --root "$OHA_ROOT" "${force[@]}" ||
		die "oha: cargo install oha@$OHA_VERSION failed (see above)"
	installed || die "oha: cargo install finished but $OHA_BIN is missing or not $OHA_VERSION"
	echo "oha: built in $((SECONDS - t0)) s" >&2
}

case "${1:-}" in
install) install_oha ;;
path) install_oha; echo "$OHA_BIN" ;;
*) die "usage: scripts/oha.sh install | path" ;;
esac
