# bash completion for pgclose, and the function that pgsync, pgdepend and
# pgcreate share with it: their files source this one.

# _fstitch_pg_ids WHICH: the ids of the groups that the mount named on the
# command line (-C DIR, --directory=DIR; else FSTITCH_CONTROL or the current
# directory) knows and the user may use (root: every group), newest first,
# as fstitch-stat --groups lists them: WHICH "known" is all of them, "open"
# those not closed, "engage" those that may still be engaged (open, not
# sealed).  Nothing when fstitch-stat is not there or the mount is not, or
# when the daemon does not answer within two seconds: TAB must not hang.
_fstitch_pg_ids()
{
	local which=$1 i dir=
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-C | --directory) dir=${words[i + 1]-} ;;
		--directory=*) dir=${words[i]#*=} ;;
		-C?*) dir=${words[i]#-C} ;;
		esac
	done
	timeout 2 fstitch-stat --groups --limit=256 ${dir:+-C "$dir"} 2>/dev/null </dev/null |
		awk -v which="$which" -v uid="$EUID" '
			$1 !~ /^[0-9]+$/ { next }
			uid != 0 && $2 != uid { next }
			which == "open" && $3 ~ /^closed/ { next }
			which == "engage" && ($3 ~ /^closed/ || $3 ~ /sealed/) { next }
			{ print $1 }'
}

# _fstitch_pg_complete WHICH LONGOPT...: complete a patchgroup command whose
# options are LONGOPT... and whose operands are group ids, offered as
# _fstitch_pg_ids WHICH lists them (none if WHICH is empty).  -C DIR takes
# a directory; -a and --after take any known group.
_fstitch_pg_complete()
{
	local cur prev words cword split which=$1
	shift
	# -s: "--directory=d" comes as prev --directory and cur d, which is
	# what readline replaces (it breaks words at '=').
	_init_completion -s || return

	case $prev in
	-C | --directory)
		_filedir -d
		return
		;;
	-a | --after)
		COMPREPLY=($(compgen -W "$(_fstitch_pg_ids known)" -- "$cur"))
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
	[[ $which ]] && COMPREPLY=($(compgen -W "$(_fstitch_pg_ids "$which")" -- "$cur"))
}

_pgclose()
{
	_fstitch_pg_complete open --directory= --help --usage --version
} &&
	complete -F _pgclose pgclose
