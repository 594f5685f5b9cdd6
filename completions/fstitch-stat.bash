# bash completion for fstitch-stat

_fstitch_stat()
{
	local cur prev words cword
	_init_completion -s || return

	case $prev in
	-C | --directory)
		_filedir -d
		return
		;;
	--patches | --why)
		# Offer the blocks that are dirty right now on the mount being
		# completed for (the current directory's by default).
		local dir=. i
		for ((i = 1; i < cword; i++)); do
			case ${words[i]} in
			-C | --directory) dir=${words[i + 1]} ;;
			esac
		done
		COMPREPLY=($(compgen -W "$(fstitch-stat -C "$dir" --blocks 2>/dev/null |
			awk '$1 ~ /^[0-9]+$/ { print $1 }')" -- "$cur"))
		return
		;;
	--limit | --watch)
		return
		;;
	esac
	$split && return

	case $cur in
	-*)
		COMPREPLY=($(compgen -W '--blocks --groups --patches= --why= --dot --json
			--limit= --watch= --directory= --quiet --verbose --help --usage
			--version' -- "$cur"))
		[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
		return
		;;
	esac
	# MOUNTPOINT: a directory.
	_filedir -d
} &&
	complete -F _fstitch_stat fstitch-stat
