#!/usr/bin/env bash
# Install the Debian packages fstitch needs to build, test and run its demo.
# Called by `make check`, `make demo` and `make bench`; does nothing when every
# package is already present.
set -eu

pkgs=(
	build-essential pkg-config
	libfuse3-dev fuse3
	e2fsprogs e2fsck-static libext2fs-dev comerr-dev libblkid-dev uuid-dev
	libcmocka-dev
	bats bats-support bats-assert parallel bash-completion
	mandoc
	fuse2fs sqlite3 git python3 jq graphviz xz-utils attr
	acl rsync libcap2-bin xfsprogs
	libnbd-dev libnbd-bin nbdkit qemu-utils
)
[ "${1:-}" = bench ] && pkgs+=(linux-source hyperfine postmark gnuplot-nox)
# make fuzz: clang-14 does not pull in compiler-rt, which holds libFuzzer
# and the sanitizer runtimes clang links against.
[ "${1:-}" = fuzz ] && pkgs+=(clang-14 libclang-rt-14-dev)

missing=()
for p in "${pkgs[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing Debian packages: ${missing[*]}" >&2
	echo "deps: run as root, or: apt-get install ${missing[*]}" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
