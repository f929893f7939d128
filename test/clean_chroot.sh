#!/usr/bin/env bash
# test/clean_chroot.sh [root|sudo] [DIR]: the proof that `make test` works
# on a fresh Debian 12 from a clean clone, with every install done by the
# project's own scripts (run as root on a Debian 12 host; not part of
# `make test`: it takes 20-30 minutes).
#
#   root   make test as root                       (the default)
#   sudo   make test as an ordinary user `alice` with sudo (the README's other
#          way), her clone in her home
#
# A minbase Debian 12 (mmdebstrap, installed here if missing) in DIR
# (default: a new directory under /var/tmp), with /proc, /sys, /dev and a
# tmpfs /dev/shm of its own mounted, gets a clone of this checkout's HEAD
# and runs `make test` from an empty environment (no LANG: no locale is
# configured, as in a container).  The chroot shares the host's network
# namespace, so its servers listen on the host's loopback like any test's;
# it gets the host's extra certificate authorities (the network's, below).
# Prints the log's last lines and exits with make test's status; the log is
# DIR/make-test.log.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$TDB_ROOT"

mode=${1:-root}
case "$mode" in root | sudo) ;; *) die "usage: test/clean_chroot.sh [root|sudo] [DIR]" ;; esac
[ "$(id -u)" = 0 ] || die "test/clean_chroot.sh builds a chroot: run it as root"
root=${2:-$(mktemp -d /var/tmp/trafficdb-chroot.XXXXXX)}

if ! command -v mmdebstrap >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap >/dev/null
fi

mounted=()
cleanup() {
	set +e
	# processes left in the chroot (servers of a failed run) go first
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null
	done
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}"; done
}
trap cleanup EXIT

if [ ! -x "$root/bin/bash" ]; then
	say "clean chroot: mmdebstrap bookworm (minbase) into $root"
	mmdebstrap --variant=minbase --include=git,ca-certificates,make,sudo bookworm "$root" >"$root.mmdebstrap.log" 2>&1 ||
		{ tail -n 30 "$root.mmdebstrap.log"; die "mmdebstrap failed"; }
fi
for m in proc sys dev; do
	mount --rbind "/$m" "$root/$m" && mount --make-rslave "$root/$m" && mounted+=("$root/$m")
done
# a /dev/shm of its own: the chroot's servers' names never meet the host's
mount -t tmpfs -o mode=1777,size=4g tmpfs "$root/dev/shm" && mounted+=("$root/dev/shm")
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This network's own certificate authorities (an egress proxy's), which any
# machine here has, and the variables naming the bundle for npm, pip, curl:
# the network's, not the project's.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
	chroot "$root" update-ca-certificates >/dev/null
fi
ca_env=()
for v in SSL_CERT_FILE SSL_CERT_DIR NODE_EXTRA_CA_CERTS PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO; do
	[ -n "${!v:-}" ] && ca_env+=("$v=${!v}")
done

if [ "$mode" = root ]; then
	home=/root
	rm -rf "$root$home/trafficdb"
	git clone -q "$TDB_ROOT" "$root$home/trafficdb"
	run=(chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=$home "${ca_env[@]}"
		bash -c "cd $home/trafficdb && make test")
else
	home=/home/alice
	chroot "$root" bash -c 'id alice >/dev/null 2>&1 || useradd -m -s /bin/bash alice'
	echo 'alice ALL=(ALL) NOPASSWD: ALL' >"$root/etc/sudoers.d/alice"
	chmod 440 "$root/etc/sudoers.d/alice"
	rm -rf "$root$home/trafficdb"
	git clone -q --no-hardlinks "$TDB_ROOT" "$root$home/trafficdb"
	chroot "$root" chown -R alice: "$home/trafficdb"
	run=(chroot "$root" runuser -u alice -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=$home USER=alice "${ca_env[@]}"
		bash -c "cd $home/trafficdb && make test")
fi

say "clean chroot: make test as $mode at $(git rev-parse --short HEAD), log in $root/make-test.log"
start=$(date +%s)
rc=0
"${run[@]}" >"$root/make-test.log" 2>&1 || rc=$?
tail -n 15 "$root/make-test.log"
echo "clean chroot ($mode): make test exited $rc after $(($(date +%s) - start)) s"
exit "$rc"
