# bash completion for fstitch-crash

_fstitch_crash()
{
	local cur prev words cword i sub=
	_init_completion -s || return

	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--)
			# COMMAND or CHECK: complete it as a command line.
			_command_offset $((i + 1))
			return
			;;
		run | states | check | image)
			[ -z "$sub" ] && sub=${words[i]}
			;;
		esac
	done

	case $prev in
	--image)
		_filedir img
		return
		;;
	--rec)
		_filedir -d
		return
		;;
	--fsck)
		COMPREPLY=($(compgen -W 'repair preen none' -- "$cur"))
		return
		;;
	-o | --options | --size | --setup | --seed | --max | --exhaustive | --samples | \
		-j | --jobs | --show)
		return
		;;
	esac
	$split && return

	case $cur in
	-*)
		COMPREPLY=($(compgen -W '--options= --image= --size= --setup= --rec=
			--seed= --max= --exhaustive= --samples= --list --jobs= --fsck=
			--no-mount --rw --show= --fail-fast --json --help --usage --version' -- "$cur"))
		[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
		return
		;;
	esac
	if [ -z "$sub" ]; then
		COMPREPLY=($(compgen -W 'run states check image' -- "$cur"))
		return
	fi
	# DIR (a recording), and for image N and OUT.
	_filedir -d
} &&
	complete -F _fstitch_crash fstitch-crash
