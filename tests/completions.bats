#!/usr/bin/env bats
# Every command in $FSTITCH_BUILD/bin has completions/<command>.bash, and
# that file offers exactly the long options `<command> --help` lists: no
# option missing, none that --help does not know.  Commands added later are
# covered without touching this file.

load common

setup() {
	common_setup
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
