# bash completion for pgclose, and the function that pgsync, pgdepend and
# pgcreate share with it: their files source this one.

# _fstitch_pg_complete LONGOPT...: complete a patchgroup command whose
# options are LONGOPT... and whose operands are group ids.  -C DIR takes a
# directory; a group id has nothing to offer.
_fstitch_pg_complete()
{
	local cur prev words cword
	_init_completion || return

	case $prev in
	-C | --directory)
		_filedir -d
		return
		;;
	esac
	case $cur in
	--directory=*)
		cur=${cur#*=}
		_filedir -d
		return
		;;
	-*)
		COMPREPLY=($(compgen -W "$*" -- "$cur"))
		return
		;;
	esac
}

_pgclose()
{
	_fstitch_pg_complete --directory --help --usage --version
} &&
	complete -F _pgclose pgclose
