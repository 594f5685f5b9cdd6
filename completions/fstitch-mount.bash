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
		COMPREPLY=($(compgen -P "${prev_opts}consistency=" -W 'softupdates none journal journal-data' -- "${cur#*=}"))
		;;
	rename_order=*)
		COMPREPLY=($(compgen -P "${prev_opts}rename_order=" -W 'all process file' -- "${cur#*=}"))
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
	commit=*)
		COMPREPLY=($(compgen -P "${prev_opts}commit=" -W '1 5 30 60' -- "${cur#*=}"))
		;;
	lock_wait=*)
		COMPREPLY=($(compgen -P "${prev_opts}lock_wait=" -W '10 60' -- "${cur#*=}"))
		;;
	nbd_retry=*)
		COMPREPLY=($(compgen -P "${prev_opts}nbd_retry=" -W '0 60 600' -- "${cur#*=}"))
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
		COMPREPLY=($(compgen -P "$prev_opts" -W 'consistency= rename_order= errors= cache= flush_interval=
			commit= lock_wait= max_threads= statsfile= nbd_retry= unsafe_no_flush blkdev noblkdev
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
	local cur prev words cword i
	# cur is the whole word, '=' and all ("consistency=s", "LABEL=x")...
	_init_completion -n = || return
	_fstitch_mount_reply
	# ... but readline replaces only what follows the last '=' when '=' is
	# in COMP_WORDBREAKS (as it is by default): drop what comes before it
	# from each candidate, as __ltrim_colon_completions does for ':'.
	if [[ $cur == *=* && $COMP_WORDBREAKS == *=* ]]; then
		local pre=${cur%"${cur##*=}"}
		for i in "${!COMPREPLY[@]}"; do
			COMPREPLY[i]=${COMPREPLY[i]#"$pre"}
		done
	fi
} &&
	complete -F _fstitch_mount fstitch-mount mount.fuse.fstitch

# _fstitch_mount_reply: COMPREPLY for cur, prev, words and cword, each
# candidate the whole word.
_fstitch_mount_reply()
{
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
		case $cur in
		LABEL=* | UUID=* | PARTLABEL=* | PARTUUID=*)
			local tag=${cur%%=*}
			COMPREPLY=($(compgen -P "$tag=" -W "$(blkid -s "$tag" -o value 2>/dev/null)" \
				-- "${cur#*=}"))
			;;
		*)
			_filedir
			COMPREPLY+=($(compgen -W 'LABEL= UUID= PARTLABEL= PARTUUID= nbd:// nbds:// nbd+unix:///' -- "$cur"))
			[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
			;;
		esac
	elif ((nargs == 1)); then
		_filedir -d
	fi
}
