# bash completion for fstitch-mkfs (and mkfs.fstitch)

_fstitch_mkfs()
{
	local cur prev words cword
	_init_completion || return

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
	-N | --inodes | -i | --bytes-per-inode | -m | --reserved-percent | -L | --label)
		# a number or a free-form label: nothing to offer
		return
		;;
	esac

	case $cur in
	--block-size=*)
		COMPREPLY=($(compgen -W '1024 2048 4096' -- "${cur#*=}"))
		return
		;;
	--uuid=*)
		COMPREPLY=($(compgen -W 'random time clear' -- "${cur#*=}"))
		return
		;;
	-*)
		COMPREPLY=($(compgen -W '--block-size --inodes --bytes-per-inode
			--inode-size --reserved-percent --label --uuid --force --dry-run
			--quiet --verbose --help --usage --version' -- "$cur"))
		return
		;;
	esac

	# The first operand is an image file or a block device; the second, a
	# size, has nothing to complete.
	local i nargs=0
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-b | -N | -i | -I | -m | -L | -U) ((i++)) ;;
		--block-size | --inodes | --bytes-per-inode | --inode-size | \
			--reserved-percent | --label | --uuid) ((i++)) ;;
		-*) ;;
		*) ((nargs++)) ;;
		esac
	done
	((nargs == 0)) && _filedir
} &&
	complete -F _fstitch_mkfs fstitch-mkfs mkfs.fstitch
