# bats helpers for crash-testing scripts with fstitch-crash(1).  In a .bats
# file:
#
#	load /usr/local/share/fstitch/bats/fstitch-crash
#
#	@test "the config update survives every power failure" {
#		fstitch_crash_run --setup 'echo old > config' -- ./update-config.sh
#		run fstitch_crash_check -- ./config-is-valid.sh
#		[ "$status" -eq 0 ]
#	}
#
# fstitch_crash_run [run options] -- COMMAND...
#	fstitch-crash run, recording into $FSTITCH_CRASH_DIR (default: a
#	directory under $BATS_TEST_TMPDIR, one per test).  Its status is
#	COMMAND's.
# fstitch_crash_check [check options] -- CHECK...
#	fstitch-crash check of that recording: 0 when every crash state
#	passed CHECK, 1 when one failed; the report is on standard output.
# fstitch_crash_states [states options]
#	fstitch-crash states of that recording.
#
# $FSTITCH_CRASH names the program (default: fstitch-crash in PATH).

fstitch_crash_dir() {
	printf '%s\n' "${FSTITCH_CRASH_DIR:-${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/fstitch-crash.rec}"
}

fstitch_crash_run() {
	"${FSTITCH_CRASH:-fstitch-crash}" run --rec "$(fstitch_crash_dir)" "$@"
}

# The recording directory goes before "--", the check after it.
fstitch_crash_check() {
	local opts=()

	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	"${FSTITCH_CRASH:-fstitch-crash}" check "${opts[@]}" "$(fstitch_crash_dir)" "$@"
}

fstitch_crash_states() {
	"${FSTITCH_CRASH:-fstitch-crash}" states "$@" "$(fstitch_crash_dir)"
}
