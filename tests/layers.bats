#!/usr/bin/env bats
# The layering of lib/ (doc/design.md): which folder may include what.  A
# failure names the file and the include that breaks the rule.

load common

setup() {
	cd "$FSTITCH_ROOT"
}

# includes: every "#include "dir/file.h"" as "FILE INCLUDED", where INCLUDED
# is the path under lib/ (a bare name is the including file's own folder).
includes() {
	local f inc dir
	for f in lib/*/*.[ch] cmd/*.c tests/unit/*.[ch] tests/tools/*.c tests/bench/*.c; do
		dir=${f%/*}
		while IFS= read -r inc; do
			case $inc in
			*/*) printf '%s %s\n' "$f" "$inc" ;;
			*) printf '%s %s\n' "$f" "${dir#lib/}/$inc" ;;
			esac
		done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
	done
}

@test "a private header (*_int.h) is included only from its own folder" {
	run bash -c "$(declare -f includes); includes" 
	assert_success
	bad=$(echo "$output" | awk '$2 ~ /_int\.h$/ {
		split($1, a, "/"); split($2, b, "/")
		if (a[1] != "lib" || a[2] != b[1]) print }')
	assert_equal "$bad" ""
}

@test "product layers include neither lib/cli nor test code" {
	run bash -c "$(declare -f includes); includes"
	assert_success
	bad=$(echo "$output" | awk '$1 ~ /^lib\// && $1 !~ /^lib\/cli\// && ($2 ~ /^cli\// || $2 ~ /tests/)')
	assert_equal "$bad" ""
}

@test "the public library includes only the API and the protocol client" {
	run bash -c "$(declare -f includes); includes"
	assert_success
	bad=$(echo "$output" | awk '($1 ~ /^lib\/api\// || $1 == "lib/proto/ctl_client.c" ||
		$1 == "lib/proto/ctl.h") && $2 !~ /^(api|proto|fstitch)\//')
	assert_equal "$bad" ""
}

@test "lower layers do not include higher ones" {
	# Each layer and the layers it may use; cli and cmd may use any.
	declare -A may=(
		[util]="util"
		[fstitch]="fstitch"
		[proto]="proto"
		[api]="api proto fstitch"
		[bdev]="bdev util"
		[engine]="engine bdev util"
		[journal]="journal bdev util"
		[ext2]="ext2 journal engine bdev util"
		[mkfs]="mkfs ext2 bdev util"
		[crash]="crash ext2 engine bdev util"
		[inspect]="inspect engine proto util"
		[pg]="pg inspect ext2 engine proto bdev util"
	)
	run bash -c "$(declare -f includes); includes"
	assert_success
	bad=
	while read -r f inc; do
		[[ $f == lib/* ]] || continue
		from=${f#lib/}
		from=${from%%/*}
		to=${inc%%/*}
		[ -n "${may[$from]+x}" ] || continue
		case " ${may[$from]} " in
		*" $to "*) ;;
		*) bad+="$f includes $inc"$'\n' ;;
		esac
	done <<<"$output"
	assert_equal "$bad" ""
}

@test "the library never prints or exits outside lib/cli" {
	run grep -nE '\b(printf|fprintf|puts|perror|exit|abort|error)\(' \
		$(ls lib/*/*.c | grep -v '^lib/cli/')
	# grep exits 1 when nothing matched: that is the pass.
	assert_failure 1
}
