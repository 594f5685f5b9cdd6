#!/usr/bin/env bats
# Every command in $FSTITCH_BUILD/bin has completions/<command>.bash, and
# that file offers exactly the long options `<command> --help` lists: no
# option missing, none that --help does not know.  Commands added later are
# covered without touching this file.

load common

setup() {
	common_setup
}

teardown() {
	cd /
	# a daemon a test stopped must run to unmount
	[ -z "${FSTITCH_MOUNT_PID:-}" ] || kill -CONT "$FSTITCH_MOUNT_PID" 2>/dev/null || :
	common_teardown
	fstitch_mount_reap
}

# commands: the built commands, one per line.
commands() {
	local c
	for c in "$FSTITCH_BIN"/*; do
		[ -f "$c" ] && [ -x "$c" ] && basename "$c"
	done
}

# help_options CMD: the long options on --help's option lines (argp's
# "  -b, --block-size=BYTES" and "      --usage"), without "=ARG", sorted.
help_options() {
	"$FSTITCH_BIN/$1" --help </dev/null 2>/dev/null |
		grep -oE '^ +(-[^ ,], )?--[[:alnum:]][-[:alnum:]]*' |
		grep -oE -- '--[[:alnum:]][-[:alnum:]]*' | sort -u
}

# completed_options CMD: what the completion offers for "CMD --<TAB>",
# without a trailing "=", sorted.  Runs the completion function the file
# registers for CMD, in a clean bash with bash-completion loaded.
completed_options() {
	bash --norc --noprofile -c '
		cmd=$1 file=$2
		[ -r /usr/share/bash-completion/bash_completion ] &&
			. /usr/share/bash-completion/bash_completion
		# compopt works only while readline is completing.
		compopt() { :; }
		. "$file" || exit 2
		spec=$(complete -p "$cmd" 2>/dev/null) || {
			echo "$file registers no completion for $cmd" >&2
			exit 3
		}
		fn=$(sed -n "s/.*-F \([^ ]*\).*/\1/p" <<<"$spec")
		[ -n "$fn" ] || { echo "no -F function in: $spec" >&2; exit 4; }
		COMP_WORDS=("$cmd" --)
		COMP_CWORD=1
		COMP_LINE="$cmd --"
		COMP_POINT=${#COMP_LINE}
		COMPREPLY=()
		"$fn" "$cmd" -- "$cmd"
		printf "%s\n" "${COMPREPLY[@]}"
	' bash "$1" "$FSTITCH_ROOT/completions/$1.bash" | sed 's/=$//; s/ *$//' | sort -u
}

@test "there are built commands to check" {
	run -0 commands
	assert [ "${#lines[@]}" -gt 0 ]
}

@test "every built command has a completion file" {
	local c missing=()
	for c in $(commands); do
		[ -r "$FSTITCH_ROOT/completions/$c.bash" ] || missing+=("$c")
	done
	assert_equal "${missing[*]}" ""
}

@test "every completion file offers every long option its command's --help lists" {
	local c h comp bad=()
	for c in $(commands); do
		[ -r "$FSTITCH_ROOT/completions/$c.bash" ] || continue
		h=$(help_options "$c")
		[ -n "$h" ] || { bad+=("$c: --help lists no long options"); continue; }
		comp=$(completed_options "$c") || { bad+=("$c: completion failed"); continue; }
		while read -r o; do
			grep -qxF -- "$o" <<<"$comp" || bad+=("$c: $o not completed")
		done <<<"$h"
	done
	printf '%s\n' "${bad[@]}" >&2
	assert_equal "${#bad[@]}" 0
}

@test "no completion file offers a long option its command's --help does not list" {
	local c h comp bad=()
	for c in $(commands); do
		[ -r "$FSTITCH_ROOT/completions/$c.bash" ] || continue
		h=$(help_options "$c")
		comp=$(completed_options "$c") || { bad+=("$c: completion failed"); continue; }
		while read -r o; do
			[ -n "$o" ] || continue
			grep -qxF -- "$o" <<<"$h" || bad+=("$c: completes $o, which --help does not list")
		done <<<"$(grep -E '^--' <<<"$comp")"
	done
	printf '%s\n' "${bad[@]}" >&2
	assert_equal "${#bad[@]}" 0
}

@test "the check itself sees an option missing from, or added to, a completion" {
	# A completion that forgets --force and invents --bogus must be
	# caught, or the tests above could pass by checking nothing.
	local h comp
	mkdir -p "$SCRATCH/completions"
	sed 's/ --force / --bogus /' "$FSTITCH_ROOT/completions/fstitch-mkfs.bash" \
		>"$SCRATCH/completions/fstitch-mkfs.bash"
	h=$(help_options fstitch-mkfs)
	comp=$(FSTITCH_ROOT=$SCRATCH completed_options fstitch-mkfs)
	grep -qxF -- --force <<<"$h"
	grep -qxF -- --block-size <<<"$comp"
	run ! grep -qxF -- --force <<<"$comp"
	grep -qxF -- --bogus <<<"$comp"
	run ! grep -qxF -- --bogus <<<"$h"
}

# ---------------------------------------------------------------- TAB in bash
# The completions as a user meets them: make install into a scratch
# DESTDIR, then an interactive bash on a terminal with bash-completion
# loaded (its COMP_WORDBREAKS, which break words at '=', and its loading of
# a completion by command name, user folder first), TAB pressed once
# (tests/tools/tabcomplete.py).

# staged: install once per file, into $BATS_FILE_TMPDIR/stage.
staged() {
	local stage=$BATS_FILE_TMPDIR/stage
	if [ ! -d "$stage/usr/local/share/bash-completion/completions" ]; then
		make --no-print-directory -s -C "$FSTITCH_ROOT" BUILD="$FSTITCH_BUILD" \
			PREFIX=/usr/local DESTDIR="$stage" install >/dev/null || return 1
	fi
	COMPDIR=$stage/usr/local/share/bash-completion
}

# tab LINE: what TAB does after LINE ("line: ..." and "candidate: ...").
tab() {
	BASH_COMPLETION_USER_DIR=${COMPDIR:?} timeout 60 python3 \
		"$FSTITCH_ROOT/tests/tools/tabcomplete.py" "$1"
}

@test "TAB after '=' in -o completes the value once, for fstitch-mount and mount.fuse.fstitch" {
	staged
	run -0 tab 'fstitch-mount -o consistency=s'
	assert_output 'line: fstitch-mount -o consistency=softupdates '
	run -0 tab 'fstitch-mount -o ro,consistency=n'
	assert_output 'line: fstitch-mount -o ro,consistency=none '
	run -0 tab 'fstitch-mount -o consistency=journal-'
	assert_output 'line: fstitch-mount -o consistency=journal-data '
	run -0 tab 'fstitch-mount --options=errors=rem'
	assert_output 'line: fstitch-mount --options=errors=remount-ro '
	run -0 tab 'fstitch-mount -o ro,cons'
	assert_output 'line: fstitch-mount -o ro,consistency='
	run -0 tab 'mount.fuse.fstitch -o consistency=s'
	assert_output 'line: mount.fuse.fstitch -o consistency=softupdates '
	run -0 tab 'fstitch-mount -o rename_order=p'
	assert_output 'line: fstitch-mount -o rename_order=process '
	run -0 tab 'fstitch-mount --max-threads='
	assert_output - <<-EOF
		line: fstitch-mount --max-threads=
		candidate: 1
		candidate: 2
		candidate: 4
		candidate: 8
	EOF
}

@test "TAB after LABEL= completes a label once" {
	local label=uxc$$ loop
	staged
	make_image "$SCRATCH/l.img" 8M -L "$label"
	loop=$(losetup -f --show "$SCRATCH/l.img")
	run tab "fstitch-mount LABEL=${label:0:5}"
	losetup -d "$loop"
	assert_success
	assert_output "line: fstitch-mount LABEL=$label "
}

@test "TAB after --block-size=, --uuid=, --fsync=, --order= and --directory= offers their values" {
	staged
	run -0 tab 'fstitch-mkfs --block-size='
	assert_output - <<-EOF
		line: fstitch-mkfs --block-size=
		candidate: 1024
		candidate: 2048
		candidate: 4096
	EOF
	run -0 tab 'fstitch-mkfs --block-size=2'
	assert_output 'line: fstitch-mkfs --block-size=2048 '
	run -0 tab 'mkfs.fstitch -U t'
	assert_output 'line: mkfs.fstitch -U time '
	run -0 tab 'fstitch-mkfs --uuid=r'
	assert_output 'line: fstitch-mkfs --uuid=random '
	run -0 tab 'pgrun --fsync='
	assert_output - <<-EOF
		line: pgrun --fsync=
		candidate: keep
		candidate: order
	EOF
	run -0 tab 'pgrun --fsync=o'
	assert_output 'line: pgrun --fsync=order '
	# after --fsync=order comes COMMAND, completed as a command
	run -0 tab 'pgrun --fsync=order debugf'
	assert_output 'line: pgrun --fsync=order debugfs '
	run -0 tab 'pgrun --order='
	assert_output - <<-EOF
		line: pgrun --order=
		candidate: groups
		candidate: mount
	EOF
	run -0 tab 'pgrun --order=groups debugf'
	assert_output 'line: pgrun --order=groups debugfs '
	mkdir -p "$SCRATCH/only/sub"
	for c in pgsync pgclose pgcreate pgdepend fstitch-stat; do
		run -0 tab "$c --directory=$SCRATCH/only/s"
		assert_output "line: $c --directory=$SCRATCH/only/sub/"
	done
	run -0 tab 'fstitch-crash check --fsck=p'
	assert_output 'line: fstitch-crash check --fsck=preen '
}

@test "TAB offers the group ids a patchgroup command may take, from the mount it names" {
	local a b c
	staged
	make_image "$SCRATCH/fs.img" 32M
	# no flush: the closed group keeps a change pending, so it is listed
	fstitch_mount_start "$SCRATCH/fs.img" "$SCRATCH/mnt" -o flush_interval=86400
	cd "$SCRATCH/mnt"
	a=$("$FSTITCH_BIN/pgcreate")
	b=$("$FSTITCH_BIN/pgcreate" --after "$a")
	c=$("$FSTITCH_BIN/pgcreate")
	"$FSTITCH_BIN/pgrun" -g "$c" -- sh -c 'echo x >f'
	"$FSTITCH_BIN/pgclose" "$c"
	# a: open and sealed (it has an after), b: open, c: closed
	export PATH=$FSTITCH_BIN:$PATH
	run -0 tab 'pgsync '
	assert_line "candidate: $a"
	assert_line "candidate: $b"
	assert_line "candidate: $c"
	run -0 tab 'pgclose '
	assert_line "candidate: $a"
	assert_line "candidate: $b"
	refute_line "candidate: $c"
	# only b may still be engaged: the one candidate is completed
	run -0 tab 'pgrun -g '
	assert_output "line: pgrun -g $b "
	run -0 tab 'pgrun --group='
	assert_output "line: pgrun --group=$b "
	for line in 'pgrun --after=' 'pgcreate -a ' 'pgdepend '; do
		run -0 tab "$line"
		assert_line "candidate: $a"
		assert_line "candidate: $c"
	done
	# from outside the mount: the one -C names, else none
	cd "$SCRATCH"
	run -0 tab "pgsync -C $SCRATCH/mnt "
	assert_line "candidate: $b"
	run -0 tab "pgclose --directory=$SCRATCH/mnt "
	assert_line "candidate: $a"
	run -0 tab 'pgsync '
	assert_output 'line: pgsync '
	# a daemon that does not answer: TAB gives up, it does not hang
	kill -STOP "$FSTITCH_MOUNT_PID"
	run -0 tab "pgsync -C $SCRATCH/mnt "
	kill -CONT "$FSTITCH_MOUNT_PID"
	assert_output "line: pgsync -C $SCRATCH/mnt "
	cd /
	fstitch_mount_stop "$SCRATCH/mnt"
}

@test "every installed command name has a completion that bash loads by that name" {
	local f n=0
	staged
	for f in "$COMPDIR"/completions/*; do
		n=$((n + 1))
		run -0 tab "${f##*/} --vers"
		assert_output "line: ${f##*/} --version "
	done
	# the nine commands and the mkfs.fstitch and mount.fuse.fstitch links
	assert [ "$n" -ge 11 ]
	assert [ -e "$COMPDIR/completions/mount.fuse.fstitch" ]
	assert [ -e "$COMPDIR/completions/mkfs.fstitch" ]
}

@test "the TAB check itself sees a value completed twice after '='" {
	# The same fstitch-mount completion without its '=' trimming must show
	# the old fault, or the tests above could pass by checking nothing.
	staged
	mkdir -p "$SCRATCH/bc/completions"
	awk '/as __ltrim_colon_completions does/ { skip = 1 } skip && /^\tfi$/ { skip = 0; next } !skip' \
		"$FSTITCH_ROOT/completions/fstitch-mount.bash" >"$SCRATCH/bc/completions/fstitch-mount"
	run grep -c 'COMPREPLY\[i\]' "$SCRATCH/bc/completions/fstitch-mount"
	assert_output 0
	COMPDIR=$SCRATCH/bc run -0 tab 'fstitch-mount -o consistency=s'
	assert_output 'line: fstitch-mount -o consistency=consistency=softupdates '
}
