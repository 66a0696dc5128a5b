# Helpers the set-up scripts share; source it: . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# say MSG...: one progress line on standard error.
say() { echo "hack: $*" >&2; }

# since T0: the time since $SECONDS was T0, as 7s or 10m42s.
since() {
	local s=$((SECONDS - $1))
	if [ "$s" -lt 60 ]; then echo "${s}s"; else printf '%dm%02ds\n' $((s / 60)) $((s % 60)); fi
}

# apt_install CMD PKG...: installs the Debian packages PKG... (as root, or through sudo) unless
# the command CMD is already there, saying what it runs and how long each step took.
apt_install() {
	local cmd=$1 t0
	shift
	if command -v "$cmd" >/dev/null 2>&1; then return 0; fi
	local sudo=()
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null 2>&1 || { echo "$0: not root and no sudo: install it yourself (apt-get install $*)" >&2; exit 1; }
		sudo=(sudo)
	fi
	say "$cmd not found: apt-get update"
	t0=$SECONDS
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
	say "apt-get update took $(since "$t0"); apt-get install -y $*"
	t0=$SECONDS
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
	command -v "$cmd" >/dev/null || { echo "$0: $* installed, yet $cmd is not in PATH" >&2; exit 1; }
	say "installed $* in $(since "$t0")"
}
