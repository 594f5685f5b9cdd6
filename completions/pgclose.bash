# bash completion for pgclose, and the function that pgsync, pgdepend and
# pgcreate share with it: their files source this one.

# _fstitch_pg_complete LONGOPT...: complete a patchgroup command whose
# options are LONGOPT... and whose operands are group ids.  -C DIR takes a
# directory; a group id has nothing to offer.
_fstitch_pg_complete()
{
	local cur prev words cword split
	# -s: "--directory=d" comes as prev --directory and cur d, which is
	# what readline replaces (it breaks words at '=').
	_init_completion -s || return

	case $prev in
	-C | --directory)
		_filedir -d
		return
		;;
	-a | --after)
		return
		;;
	esac
	$split && return
	case $cur in
	-*)
		COMPREPLY=($(compgen -W "$*" -- "$cur"))
		[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
		return
		;;
	esac
}

_pgclose()
{
	_fstitch_pg_complete --directory= --help --usage --version
} &&
	complete -F _pgclose pgclose
