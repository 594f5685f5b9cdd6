# bash completion for fstitch-mkfs (and mkfs.fstitch)

_fstitch_mkfs()
{
	local cur prev words cword split
	# -s: "--block-size=2" comes as prev --block-size and cur 2, which is
	# what readline replaces (it breaks words at '=').
	_init_completion -s || return

	case $prev in
	-b | --block-size)
		COMPREPLY=($(compgen -W '1024 2048 4096' -- "$cur"))
		return
		;;
	-I | --inode-size)
		COMPREPLY=($(compgen -W '128 256 512 1024' -- "$cur"))
		return
		;;
	-U | --uuid)
		COMPREPLY=($(compgen -W 'random time clear' -- "$cur"))
		return
		;;
	-J | --journal-options)
		# the one journal option; its value is a number of MiB
		COMPREPLY=($(compgen -W 'size=' -- "$cur"))
		[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
		return
		;;
	-N | --inodes | -i | --bytes-per-inode | -m | --reserved-percent | -L | --label)
		# a number or a free-form label: nothing to offer
		return
		;;
	esac
	$split && return

	case $cur in
	-*)
		COMPREPLY=($(compgen -W '--block-size= --inodes= --bytes-per-inode=
			--inode-size= --reserved-percent= --journal --journal-options= --label=
			--uuid= --force --dry-run
			--quiet --verbose --help --usage --version' -- "$cur"))
		[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
		return
		;;
	esac

	# The first operand is an image file or a block device; the second, a
	# size, has nothing to complete.
	local i nargs=0
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-b | -N | -i | -I | -m | -J | -L | -U) ((i++)) ;;
		--block-size | --inodes | --bytes-per-inode | --inode-size | \
			--reserved-percent | --journal-options | --label | --uuid) ((i++)) ;;
		-*) ;;
		*) ((nargs++)) ;;
		esac
	done
	((nargs == 0)) && _filedir
} &&
	complete -F _fstitch_mkfs fstitch-mkfs mkfs.fstitch
