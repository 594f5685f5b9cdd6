# bash completion for pgcreate

# The function the patchgroup commands share is in pgclose's file, next to
# this one: pgclose.bash in the source tree, pgclose once installed (each
# file is loaded on its own, by command name).
if ! declare -F _fstitch_pg_complete >/dev/null; then
	for _fstitch_f in "${BASH_SOURCE[0]%/*}"/pgclose{,.bash}; do
		# shellcheck source=pgclose.bash
		[[ -f $_fstitch_f ]] && . "$_fstitch_f" && break
	done
	unset _fstitch_f
fi

_pgcreate()
{
	_fstitch_pg_complete "" --after= --directory= --help --usage --version
} &&
	complete -F _pgcreate pgcreate
