# bash completion for pgcreate

_pgcreate()
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
		COMPREPLY=($(compgen -W '--after --directory --help --usage --version' -- "$cur"))
		return
		;;
	esac
	# Operands are group ids: nothing to offer.
} &&
	complete -F _pgcreate pgcreate
