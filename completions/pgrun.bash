# bash completion for pgrun

# The group ids of the mount come from _fstitch_pg_ids, in pgclose's file
# next to this one (as for pgsync, which says why).
if ! declare -F _fstitch_pg_ids >/dev/null; then
	for _fstitch_f in "${BASH_SOURCE[0]%/*}"/pgclose{,.bash}; do
		# shellcheck source=pgclose.bash
		[[ -f $_fstitch_f ]] && . "$_fstitch_f" && break
	done
	unset _fstitch_f
fi

_pgrun()
{
	local cur prev words cword split
	# -s: "--fsync=o" comes as prev --fsync and cur o (see fstitch-mkfs).
	_init_completion -s || return

	# Once COMMAND has started, complete it as a command line of its own.
	local i
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-g | -a | -C | --group | --after | --directory | --id-file | --id-fd | --fsync | --order)
			((i++))
			;;
		--)
			_command_offset $((i + 1))
			return
			;;
		-*) ;;
		*)
			_command_offset $i
			return
			;;
		esac
	done

	case $prev in
	--fsync)
		COMPREPLY=($(compgen -W 'order keep' -- "$cur"))
		return
		;;
	--order)
		COMPREPLY=($(compgen -W 'groups mount' -- "$cur"))
		return
		;;
	-C | --directory)
		_filedir -d
		return
		;;
	--id-file)
		_filedir
		return
		;;
	-g | --group)
		COMPREPLY=($(compgen -W "$(_fstitch_pg_ids engage)" -- "$cur"))
		return
		;;
	-a | --after)
		COMPREPLY=($(compgen -W "$(_fstitch_pg_ids known)" -- "$cur"))
		return
		;;
	--id-fd)
		return
		;;
	esac
	$split && return

	case $cur in
	-*)
		COMPREPLY=($(compgen -W '--group= --after= --sync --fsync= --order= --print-id
			--id-file= --id-fd= --directory= --help --usage --version' -- "$cur"))
		[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
		return
		;;
	esac
	COMPREPLY=($(compgen -c -- "$cur"))
} &&
	complete -F _pgrun pgrun
