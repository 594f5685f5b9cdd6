#!/usr/bin/env bats
# make install and make uninstall into a DESTDIR: what is installed, that
# man(1) finds every name a command is run under, that every command prints
# one --version format, and that uninstall leaves nothing behind (no file,
# no empty folder) but what was there before.

load common

setup() {
	common_setup
	STAGE=$SCRATCH/stage
	MAN=$STAGE/usr/local/share/man
}

teardown() {
	common_teardown
}

# mk TARGET: make TARGET of this tree into $STAGE, against the build under
# test (nothing is rebuilt: the build is already up to date).
mk() {
	make --no-print-directory -s -C "$FSTITCH_ROOT" BUILD="$FSTITCH_BUILD" \
		PREFIX=/usr/local DESTDIR="$STAGE" "$1"
}

@test "make install puts the command links and their man pages where mount, mkfs and man look" {
	mk install >/dev/null
	assert [ -x "$STAGE/usr/local/bin/fstitch-mount" ]
	assert_equal "$(readlink "$STAGE/sbin/mount.fuse.fstitch")" /usr/local/bin/fstitch-mount
	assert_equal "$(readlink "$STAGE/usr/local/sbin/mkfs.fstitch")" /usr/local/bin/fstitch-mkfs
	# man finds the link names through .so pages, as for mkfs.ext2
	run -0 man -M "$MAN" -w mkfs.fstitch
	assert_output "$MAN/man8/fstitch-mkfs.8"
	run -0 man -M "$MAN" -w mount.fuse.fstitch
	assert_output "$MAN/man8/fstitch-mount.8"
	run -0 man -M "$MAN" -w pg_depend
	assert_output "$MAN/man3/pg_create.3"
	MANWIDTH=80 run -0 man -M "$MAN" -P cat mount.fuse.fstitch
	assert_line --partial 'fstitch-mount — serve an ext2 file system through FUSE'
	# completion for the link names as well
	assert_equal "$(readlink "$STAGE/usr/local/share/bash-completion/completions/mount.fuse.fstitch")" fstitch-mount
	assert_equal "$(readlink "$STAGE/usr/local/share/bash-completion/completions/mkfs.fstitch")" fstitch-mkfs
}

@test "make uninstall removes every file and every folder install made, and nothing else" {
	# a folder and a file that were there before stay
	mkdir -p "$STAGE/usr/local/bin" "$STAGE/usr/local/share/man/man1"
	echo mine >"$STAGE/usr/local/bin/other"
	mk install >/dev/null
	# a second install changes nothing about what uninstall removes
	mk install >/dev/null
	mk uninstall >/dev/null
	run -0 bash -c 'find "$1" -mindepth 1 | LC_ALL=C sort' - "$STAGE"
	assert_output - <<-EOF
		$STAGE/usr
		$STAGE/usr/local
		$STAGE/usr/local/bin
		$STAGE/usr/local/bin/other
		$STAGE/usr/local/share
		$STAGE/usr/local/share/man
		$STAGE/usr/local/share/man/man1
	EOF
	# from an empty DESTDIR, nothing at all is left
	rm -rf "$STAGE"
	mk install >/dev/null
	mk uninstall >/dev/null
	assert [ ! -e "$STAGE" ]
}

@test "every command, under each name it is installed as, prints --version as NAME (fstitch) VERSION" {
	local c n=0 version
	version=$(sed -n 's/^VERSION := //p' "$FSTITCH_ROOT/Makefile")
	mk install >/dev/null
	for c in "$FSTITCH_BUILD"/bin/*; do
		n=$((n + 1))
		run -0 "$STAGE/usr/local/bin/${c##*/}" --version
		assert_output "${c##*/} (fstitch) $version"
	done
	assert [ "$n" -ge 9 ]
	# the links point into the real PREFIX: run the staged command under
	# the link's name
	run -0 bash -c 'exec -a mkfs.fstitch "$1" --version' - "$STAGE/usr/local/bin/fstitch-mkfs"
	assert_output "fstitch-mkfs (fstitch) $version"
	run -0 bash -c 'exec -a mount.fuse.fstitch "$1" --version' - "$STAGE/usr/local/bin/fstitch-mount"
	assert_output "fstitch-mount (fstitch) $version"
}
