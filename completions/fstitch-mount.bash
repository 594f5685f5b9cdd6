# bash completion for fstitch-mount (and mount.fuse.fstitch)

_fstitch_mount_o()
{
	local cur=$1 prev_opts=${2-} opt
	# complete the last item of a comma-separated list
	if [[ $cur == *,* ]]; then
		prev_opts+=${cur%,*},
		cur=${cur##*,}
	fi
	case $cur in
	consistency=*)
		COMPREPLY=($(compgen -P "${prev_opts}consistency=" -W 'softupdates none' -- "${cur#*=}"))
		;;
	errors=*)
		COMPREPLY=($(compgen -P "${prev_opts}errors=" -W 'continue remount-ro panic' -- "${cur#*=}"))
		;;
	cache=*)
		COMPREPLY=($(compgen -P "${prev_opts}cache=" -W '16M 64M 256M 1G' -- "${cur#*=}"))
		;;
	flush_interval=*)
		COMPREPLY=($(compgen -P "${prev_opts}flush_interval=" -W '1 5 30 60' -- "${cur#*=}"))
		;;
	lock_wait=*)
		COMPREPLY=($(compgen -P "${prev_opts}lock_wait=" -W '10 60' -- "${cur#*=}"))
		;;
	max_threads=*)
		COMPREPLY=($(compgen -P "${prev_opts}max_threads=" -W '1 2 4 8' -- "${cur#*=}"))
		;;
	statsfile=*)
		# a file name after the '='
		COMPREPLY=($(compgen -P "${prev_opts}statsfile=" -f -- "${cur#*=}"))
		;;
	fsname=* | subtype=* | max_read=*)
		COMPREPLY=()
		;;
	*)
		COMPREPLY=($(compgen -P "$prev_opts" -W 'consistency= errors= cache= flush_interval=
			lock_wait= max_threads= statsfile=
			ro rw allow_other allow_root auto_unmount fsname= subtype= max_read=
			nosuid suid nodev dev noexec exec noatime atime relatime norelatime
			strictatime nostrictatime lazytime nolazytime nodiratime diratime
			sync async dirsync debug defaults noauto nofail' -- "$cur"))
		;;
	esac
	for opt in "${COMPREPLY[@]}"; do
		[[ $opt == *= ]] && compopt -o nospace
	done
}

_fstitch_mount()
{
	local cur prev words cword
	_init_completion -n = || return

	case $prev in
	--max-threads)
		COMPREPLY=($(compgen -W '1 2 4 8' -- "$cur"))
		return
		;;
	-o | --options)
		_fstitch_mount_o "$cur"
		return
		;;
	esac
	case $cur in
	--max-threads=*)
		COMPREPLY=($(compgen -P --max-threads= -W '1 2 4 8' -- "${cur#*=}"))
		return
		;;
	--options=*)
		_fstitch_mount_o "${cur#--options=}" --options=
		return
		;;
	-*)
		COMPREPLY=($(compgen -W '-o --options= -f --foreground -d --debug
			-s --single-thread --max-threads= -? --help --usage -V --version' -- "$cur"))
		[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
		return
		;;
	esac

	local i nargs=0
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-o | --options | --max-threads) ((i++)) ;;
		-*) ;;
		*) ((nargs++)) ;;
		esac
	done
	if ((nargs == 0)); then
		if [[ $cur == LABEL=* || $cur == UUID=* ]]; then
			local tag=${cur%%=*}
			COMPREPLY=($(compgen -P "$tag=" -W "$(blkid -s "$tag" -o value 2>/dev/null)" \
				-- "${cur#*=}"))
		else
			_filedir
			COMPREPLY+=($(compgen -W 'LABEL= UUID=' -- "$cur"))
		fi
	elif ((nargs == 1)); then
		_filedir -d
	fi
} &&
	complete -F _fstitch_mount fstitch-mount mount.fuse.fstitch
