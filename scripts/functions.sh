# SPDX-License-Identifier: GPL-2.0
#
# functions.sh: helpers shared by nmiclock's scripts.  Sourced, never run.
#
# Everything that is built for the project (bindgen, the unpacked kernel
# source, configured and built kernels, VM probe results) lives in one cache
# directory outside the checkout:
#
#   NMICLOCK_CACHE (default: ${XDG_CACHE_HOME:-$HOME/.cache}/nmiclock)

NMC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NMC_CACHE=${NMICLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nmiclock}

# Toolchain used for the kernel and the module (see
# ../shared/notes/platform.md in the team notes for why these and no others).
NMC_RUSTC=/usr/bin/rustc
NMC_BINDGEN_VERSION=0.73.2
NMC_BINDGEN=$NMC_CACHE/tools/bin/bindgen
# virtme-ng, for vm-run --runner vng (a kernel booted with this machine's
# own userspace, as kernel developers boot theirs): pinned, from PyPI, in
# the cache's Python environment (scripts/provision installs it).
NMC_VENV=$NMC_CACHE/venv
NMC_VNG_VERSION=1.42
NMC_VNG=$NMC_VENV/bin/vng

# The kernel releases nmiclock builds against, as data: per release, the
# Debian source package, the suite it comes from (empty: the machine's own
# apt sources, installed as a package; else fetched with apt's own download
# into the cache through the archive the machine's sources name, with apt
# state of our own), and the LLVM that meets the release's minimums
# (scripts/min-tool-version.sh: 7.x wants LLVM >= 17.0.1, applied to
# libclang too; rustc-web 1.96 and bindgen 0.73.2 meet both). 6.12 stays on
# the LLVM it has always been built with, so that its cached kernels and
# measured figures stay valid. Supported (the test command builds both):
# 6.12 and 7.3. 7.2 (sid) has a row by the same recipe, untried and
# unsupported (Kbuild refuses it without NMICLOCK_UNSUPPORTED=1).
NMC_RELEASES="6.12 7.3"
nmc_release_row() {
	case $1 in
	#     package           suite             LLVM
	6.12) echo "linux-source-6.12 -                -14" ;;
	7.3)  echo "linux-source-7.3  trixie-backports -19" ;;
	7.2)  echo "linux-source-7.2  sid              -19" ;;
	*) return 1 ;;
	esac
}

# nmc_release_select RELEASE: make RELEASE the one the helpers below
# (nmc_kernel_version, nmc_kernel_src, nmc_make_vars, ...) speak of.
# Exported, so that the scripts and make recipes a script calls follow.
nmc_release_select() {
	local row
	row=$(nmc_release_row "$1") || return 1
	# shellcheck disable=SC2086
	set -- "$1" $row
	NMC_RELEASE=$1 NMC_KERNEL_PKG=$2 NMC_KERNEL_SUITE=${3#-} NMC_LLVM=$4
	if [ -z "$NMC_KERNEL_SUITE" ]; then
		NMC_KERNEL_TARBALL=/usr/src/$NMC_KERNEL_PKG.tar.xz
	else
		NMC_KERNEL_TARBALL=$NMC_CACHE/releases/$NMC_RELEASE/x/usr/src/$NMC_KERNEL_PKG.tar.xz
	fi
	export NMC_RELEASE
}

# The release a script's --release names (NMC_RELEASE in the environment:
# the caller's choice), 6.12 by default.
nmc_release_select "${NMC_RELEASE:-6.12}" || {
	printf '%s: unknown kernel release NMC_RELEASE=%s (supported: %s)\n' \
		"$(basename "$0")" "$NMC_RELEASE" "$NMC_RELEASES" >&2
	exit 2
}

# nmc_release_opt VALUE: what a script's --release does (exit 2 on a
# release not in the table, naming the supported ones).
nmc_release_opt() {
	nmc_release_select "$1" ||
		nmc_die "unknown kernel release '$1' (supported: $NMC_RELEASES)"
}

# nmc_tree_release KDIR: the release (table row) of a kernel tree, from
# its kernel.release; fails for a release not in the table.
nmc_tree_release() {
	local r
	r=$(cat "$1/include/config/kernel.release" 2>/dev/null) || return 1
	r=$(echo "$r" | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p')
	nmc_release_row "$r" >/dev/null || return 1
	echo "$r"
}

# Bump when the way a kernel is configured or built changes, so that cached
# builds made the old way are not reused.
NMC_KBUILD_SCHEME=1

# The kselftest-style config fragments, per kernel flavour.
NMC_SELFTEST_DIR=$NMC_ROOT/tools/testing/selftests/nmiclock

NMC_JOBS=${NMICLOCK_JOBS:-$(nproc)}

# rustup's cargo (host crates, bindgen) may not be on a non-login PATH.
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
	PATH=$PATH:$HOME/.cargo/bin
fi

nmc_prog=$(basename "$0")

nmc_log() {
	printf '%s: %s\n' "$nmc_prog" "$*"
}

nmc_err() {
	printf '%s: error: %s\n' "$nmc_prog" "$*" >&2
}

nmc_die() {
	nmc_err "$@"
	exit 2
}

# --- the scripts' command lines ------------------------------------------------
# Every script takes --opt value and --opt=value alike (nmc_opt_split), and
# refuses an unknown option or a bad value before it provisions or builds
# anything: exit 2, or 128 under run-main --bisect (NMC_USAGE_STATUS), one
# line, and the script's usage (nmc_usage_die).

# nmc_opt_split ARG: for ARG --opt=value, sets NMC_OPT and NMC_VAL (true);
# false for anything else. A parser's first case:
#   --*=*) nmc_opt_split "$1"; shift; set -- "$NMC_OPT" "$NMC_VAL" "$@"; continue ;;
nmc_opt_split() {
	case $1 in
	--*=*) NMC_OPT=${1%%=*} NMC_VAL=${1#*=} ;;
	*) return 1 ;;
	esac
}

# nmc_help: the calling script's header comment (from its fourth line to
# the first line that is not a comment), as its --help prints it; exits 0.
nmc_help() {
	sed -n '4,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'
	exit 0
}

# nmc_usage_die MESSAGE: MESSAGE and the calling script's usage (its
# header's "Usage:" lines) on stderr; exits NMC_USAGE_STATUS (2).
nmc_usage_die() {
	nmc_err "$1"
	sed -n '/^# Usage:/,/^#$/p' "$0" | sed '$d; s/^# \{0,1\}//; s/^Usage:/usage:/' >&2
	nmc_err "(try $nmc_prog --help)"
	exit "${NMC_USAGE_STATUS:-2}"
}

# The options of scripts/vm-run, NAME:N (N values follow it). run-main,
# soak, run-bench and zoo pass on those they do not take themselves
# (nmc_vm_arg) and refuse any other.
NMC_VM_RUN_OPTIONS="--release:1 --arch:1 --flavour:1 --kdir:1 --kernel:1
--no-load:0 --params:1 --no-build:0 --timeout:1 --boot-timeout:1 --smp:1
--mem:1 --accel:1 --append:1 --log:1 --kselftest:1 --add:1 --with:1
--runner:1 --lava-out:1"

# nmc_vm_value OPTION VALUE: VALUE is one that OPTION of vm-run's (or of a
# script's own of that name) takes, as far as it can be told without a
# kernel; else one line and false.
nmc_vm_value() {
	case $1 in
	--timeout | --boot-timeout | --smp | --mem)
		case $2 in '' | *[!0-9]* | 0) nmc_err "$1 '$2': want a positive number"; return 1 ;; esac ;;
	--accel)
		case $2 in auto | tcg | kvm) ;; *) nmc_err "--accel '$2': want auto, tcg or kvm"; return 1 ;; esac ;;
	--runner)
		case $2 in qemu | vng) ;; *) nmc_err "--runner '$2': want qemu or vng"; return 1 ;; esac ;;
	--flavour)
		case $2 in default | debug) ;; *) nmc_err "--flavour '$2': want default or debug"; return 1 ;; esac ;;
	--arch)
		nmc_arch "$2" >/dev/null || { nmc_err "--arch '$2': want x86_64 or arm64"; return 1; } ;;
	--release)
		nmc_release_row "$2" >/dev/null ||
			{ nmc_err "--release '$2': not a supported kernel release (supported: $NMC_RELEASES)"; return 1; } ;;
	--kdir)
		[ -f "$2/.config" ] || { nmc_err "--kdir '$2': no .config there (a configured, built kernel tree)"; return 1; } ;;
	--kernel | --kselftest)
		[ -e "$2" ] || { nmc_err "$1 '$2': no such file or directory"; return 1; } ;;
	--with) nmc_with_check "$2" ;;
	--add)
		case $2 in
		*:/opt/*/* | *:/opt/nmiclock | *:/opt/kselftest | *:/opt/with) nmc_err "--add $2: want DIR:/opt/NAME, NAME one new directory"; return 1 ;;
		*:/opt/?*) [ -d "${2%%:*}" ] || { nmc_err "--add $2: no directory ${2%%:*}"; return 1; } ;;
		*) nmc_err "--add $2: want DIR:/opt/NAME"; return 1 ;;
		esac ;;
	--params | --append | --log | --lava-out | --out | --kcidb)
		[ -n "$2" ] || { nmc_err "$1 needs a value"; return 1; } ;;
	esac
}

# nmc_vm_check OPTION VALUE: nmc_vm_value, or its line and the usage
# (nmc_usage_die).
nmc_vm_check() {
	local msg
	msg=$(nmc_vm_value "$1" "$2" 2>&1) || nmc_usage_die "${msg#*: error: }"
}

# nmc_vm_arg ARRAY OPTION [VALUE]: OPTION, one of vm-run's, and its value
# (checked) appended to the array named ARRAY; NMC_TOOK says how many
# arguments that took (1 or 2). Any other option, or a bad value: exits
# (nmc_usage_die). A parser's catch-all:
#   *) nmc_vm_arg vm_args "$@"; shift $((NMC_TOOK - 1)) ;;
nmc_vm_arg() {
	local -n nmc_into=$1
	local o n=
	shift
	for o in $NMC_VM_RUN_OPTIONS; do
		[ "${o%:*}" = "$1" ] && n=${o#*:}
	done
	case $n in
	'') nmc_usage_die "unknown option '$1'" ;;
	0) nmc_into+=("$1"); NMC_TOOK=1 ;;
	*)
		[ $# -ge 2 ] || nmc_usage_die "$1 needs a value"
		nmc_vm_check "$1" "$2"
		nmc_into+=("$1" "$2"); NMC_TOOK=2 ;;
	esac
}

# nmc_kselftest_framework SRC DEST: the part of the kernel tree at SRC that
# its kselftest Makefile reads (the top Makefile, lib.mk, the runner, and
# what the Makefile includes from scripts/), copied to the same paths
# under DEST.
nmc_kselftest_framework() {
	mkdir -p "$2/tools/testing/selftests" "$2/scripts" &&
		cp -a "$1/scripts/subarch.include" "$2/scripts/" &&
		cp -a "$1/tools/testing/selftests/"{Makefile,lib.mk,kselftest,kselftest.h,run_kselftest.sh,kselftest_install.sh} \
			"$2/tools/testing/selftests/"
}

# nmc_readme_recipe: README's kselftest recipe, its commands as written
# (the indented block after the line beginning "kernel's way, the
# directory copied"), sudo taken off (the guest runs as root and has
# none).
nmc_readme_recipe() {
	awk '/^kernel.s way, the directory copied/ { f = 1; next }
		f && /^    / { sub(/^    /, ""); sub(/^sudo /, ""); print; got = 1; next }
		f && got { exit }' "$NMC_ROOT/README.md"
}

# nmc_readme_vng: README's virtme-ng line, as written (the indented line
# beginning "vng " after the line ending "the suite from this checkout:").
nmc_readme_vng() {
	awk '/the suite from this checkout:$/ { f = 1; next }
		f && /^    vng / { sub(/^    /, ""); print; exit }' "$NMC_ROOT/README.md"
}

# nmc_bisect_status RC: a run's exit status as `git bisect run` reads it:
# 0 (SUCCESS) good, 1 (FAILURE) bad, 2 (bad usage) 128, which aborts the
# bisection, and anything else 125, a skip: INCONCLUSIVE (4) says nothing
# of the commit, nor do the harness's 121-125 (the module did not build or
# load against it, the guest died, splatted or timed out).
nmc_bisect_status() {
	case $1 in
	0 | 1) echo "$1" ;;
	2) echo 128 ;;
	*) echo 125 ;;
	esac
}

# nmc_step N TOTAL MESSAGE: announce step N of TOTAL of a long job.
nmc_step() {
	local n=$1 total=$2
	shift 2
	printf '%s: [%s/%s] %s\n' "$nmc_prog" "$n" "$total" "$*"
}

# nmc_merge_params DEFAULTS USER: module parameters ("key=value ..."), those
# of USER merged into DEFAULTS key by key, printed as one string: the keys of
# DEFAULTS in their order, then USER's new keys in theirs; when a key comes
# twice, its later value wins.  A word that is not key=value is an error
# (one line, status 2).
nmc_merge_params() {
	local -a words=() keys=()
	local -A val=()
	local w k out=
	read -rd '' -a words <<<"$1 $2"
	for w in "${words[@]}"; do
		case $w in
		[!=]*=*) ;;
		*) nmc_err "module parameter '$w' is not key=value"; return 2 ;;
		esac
		k=${w%%=*}
		[ -n "${val[$k]+set}" ] || keys+=("$k")
		val[$k]=${w#*=}
	done
	for k in "${keys[@]}"; do
		out="$out${out:+ }$k=${val[$k]}"
	done
	printf '%s\n' "$out"
}

# nmc_run_logged LOGFILE LABEL CMD...: run CMD with its output in LOGFILE,
# showing that a long step is alive: on a terminal one line updated in
# place every 2 s, otherwise a plain line every 20 s, each with the time
# taken, the log's length and its last line. With NMC_EXPECT_LINES set
# (about how long the log of a finished run is), also how far along that
# is and roughly how long is left, extrapolated from the rate so far. On
# failure the tail of the log is shown and the status returned.
nmc_run_logged() {
	local logfile=$1 label=$2
	shift 2
	local start=$SECONDS rc pid tty=0 every=20 lines line left elapsed pct
	[ -t 1 ] && tty=1 every=2
	"$@" >"$logfile" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		local i
		for i in $(seq "$every"); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 1
		done
		kill -0 "$pid" 2>/dev/null || break
		elapsed=$((SECONDS - start))
		lines=$(wc -l <"$logfile")
		line="$label: ${elapsed}s, $lines lines of output"
		if [ -n "${NMC_EXPECT_LINES-}" ] && [ "$lines" -gt 0 ]; then
			pct=$((lines * 100 / NMC_EXPECT_LINES))
			[ "$pct" -le 99 ] || pct=99
			left=$((elapsed * (NMC_EXPECT_LINES - lines) / lines))
			[ "$left" -ge 0 ] || left=0
			if [ "$left" -lt 120 ]; then
				left="${left}s"
			else
				left="$(((left + 59) / 60)) min"
			fi
			line="$label: ${elapsed}s, about $pct% (${lines} of ~$NMC_EXPECT_LINES lines), about $left left"
		fi
		[ "$lines" -eq 0 ] || line="$line, last: $(tail -n 1 "$logfile" | cut -c1-60)"
		if [ $tty = 1 ]; then
			# Cut to the terminal's width: a wrapped line is not redrawn.
			line="$nmc_prog:       $line"
			printf '\r\033[K%s' "${line:0:$(($(tput cols 2>/dev/null || echo 100) - 1))}"
		else
			printf '%s:       %s\n' "$nmc_prog" "$line"
		fi
	done
	wait "$pid"
	rc=$?
	[ $tty = 0 ] || printf '\r\033[K'
	if [ "$rc" -ne 0 ]; then
		nmc_err "$label failed (exit $rc) after $((SECONDS - start))s; last lines of $logfile:"
		tail -n 40 "$logfile" >&2
	else
		printf '%s:       %s: done in %ds\n' "$nmc_prog" "$label" $((SECONDS - start))
	fi
	return "$rc"
}

# Architectures a kernel can be provisioned for, as the kernel names them
# (ARCH=); x86_64 is the default.  nmc_arch NAME prints the kernel's name for
# NAME (x86, x86_64, arm64 or aarch64), or fails.
nmc_arch() {
	case $1 in
	x86|x86_64) echo x86_64 ;;
	arm64|aarch64) echo arm64 ;;
	*) return 1 ;;
	esac
}

# nmc_vm_kernel ARCH ARCH_GIVEN KDIR IMAGE FLAVOUR: the kernel a VM command
# (run-main, soak, run-bench) boots, from its options: --arch ARCH (given
# if ARCH_GIVEN is not empty), --kdir KDIR (your own tree, whose
# architecture it takes and an --arch given must name), --kernel IMAGE and
# --flavour FLAVOUR (a provisioned kernel's, so not with --kdir). Sets
# NMC_ARCH, and NMC_VM_KERNEL to vm-run's options for that kernel (an
# array); exits 2, saying why, on a combination that names no kernel.
nmc_vm_kernel() {
	local arch=$1 given=$2 kdir=$3 image=$4 flavour=$5 tree_arch
	NMC_VM_KERNEL=()
	arch=$(nmc_arch "$arch") || nmc_usage_die "--arch must be x86_64 or arm64"
	if [ -n "$kdir" ]; then
		tree_arch=$(nmc_tree_arch "$kdir") || nmc_die "--kdir $kdir: no configured x86_64 or arm64 kernel tree there"
		[ -z "$given" ] || [ "$arch" = "$tree_arch" ] || nmc_die "--kdir $kdir is an $tree_arch kernel, --arch says $arch"
		arch=$tree_arch
		NMC_VM_KERNEL+=(--kdir "$kdir")
	fi
	[ -z "$image" ] || NMC_VM_KERNEL+=(--kernel "$image")
	[ -z "$kdir" ] || [ "$flavour" = default ] || nmc_usage_die "--flavour: a provisioned kernel's; --kdir names your own"
	[ "$flavour" = default ] || NMC_VM_KERNEL+=(--flavour "$flavour")
	NMC_ARCH=$arch
}

# uname -m of an architecture: the suffix of its kselftest-style fragment
# (config.x86_64, config.aarch64), as the kernel's selftests name theirs.
nmc_uname_m() {
	case $1 in
	arm64) echo aarch64 ;;
	*) echo "$1" ;;
	esac
}

# Config fragments that make up a kernel flavour for an architecture, in
# merge order (a later fragment's value wins): the selftests' kselftest-style
# `config`, the architecture's `config.<uname -m>`, for `debug` (x86_64
# only) the lock, memory and object debugging on top (`config.debug`); then
# what the lab's kernels leave out to build and boot sooner
# (scripts/kconfig/: `trim.config`, then `trim.<arch>.config` where there is
# one), which a kernel developer's own tree need not; last, for the x86_64
# default kernels, what virtme-ng boots with (`vng.config`).
nmc_flavour_fragments() {
	local arch=${2:-x86_64} f frags
	frags="$NMC_SELFTEST_DIR/config $NMC_SELFTEST_DIR/config.$(nmc_uname_m "$arch")"
	case $1/$arch in
	default/*) ;;
	debug/x86_64) frags="$frags $NMC_SELFTEST_DIR/config.debug" ;;
	*) return 1 ;;
	esac
	for f in trim trim.$arch; do
		[ ! -f "$NMC_ROOT/scripts/kconfig/$f.config" ] || frags="$frags $NMC_ROOT/scripts/kconfig/$f.config"
	done
	# What virtme-ng boots with (vm-run --runner vng): the x86_64 default
	# kernels only, the kernels it boots here.
	[ "$1/$arch" != default/x86_64 ] || frags="$frags $NMC_VNG_FRAGMENT"
	echo "$frags"
}
# The options a kernel needs to boot under virtme-ng with the host's root
# shared over 9p (check-kernel reports them; vm-run --runner vng refuses a
# tree without them).
NMC_VNG_FRAGMENT=$NMC_ROOT/scripts/kconfig/vng.config

# nmc_vng_missing CONFIG: the options of NMC_VNG_FRAGMENT (its =y lines)
# that the .config at CONFIG does not have, one per line.
nmc_vng_missing() {
	local line
	grep '^CONFIG_[A-Za-z0-9_]*=y$' "$NMC_VNG_FRAGMENT" | while IFS= read -r line; do
		grep -qx "$line" "$1" 2>/dev/null || echo "$line"
	done
}

# nmc_fragment_settings FRAGMENT...: what the fragments ask for together,
# one "FRAGMENT LINE" per option (a CONFIG_X=... or "# CONFIG_X is not set"
# line), where several set it the last one's, as merge_config.sh merges
# them; in the order the options first appear.
nmc_fragment_settings() {
	awk '
		/^CONFIG_[A-Za-z0-9_]+=/ { opt = $0; sub(/=.*/, "", opt) }
		/^# CONFIG_[A-Za-z0-9_]+ is not set$/ { opt = $2 }
		opt != "" {
			if (!(opt in line)) order[n++] = opt
			line[opt] = $0; from[opt] = FILENAME; opt = ""
		}
		END { for (i = 0; i < n; i++) print from[order[i]], line[order[i]] }
	' "$@"
}

# The version of the selected release's source package: the installed
# package's, or (from another suite) the fetched one's.
nmc_kernel_version() {
	if [ -z "$NMC_KERNEL_SUITE" ]; then
		dpkg-query -W -f='${Version}' "$NMC_KERNEL_PKG" 2>/dev/null
	else
		cat "$NMC_CACHE/releases/$NMC_RELEASE/version" 2>/dev/null
	fi
}

# The unpacked kernel source tree (scripts/provision unpacks it).
nmc_kernel_src() {
	echo "$NMC_CACHE/src/linux-$(nmc_kernel_version)"
}

# The inputs that decide whether a cached kernel build can be reused, one
# per line.  A change in any of them gives a new cache key.
nmc_kernel_key_inputs() {
	local flavour=$1 arch=${2:-x86_64} frag
	echo "scheme: $NMC_KBUILD_SCHEME"
	echo "arch: $arch"
	echo "flavour: $flavour"
	echo "kernel: $NMC_KERNEL_PKG $(nmc_kernel_version)"
	echo "rustc: $("$NMC_RUSTC" --version 2>/dev/null)"
	echo "clang: $(clang$NMC_LLVM --version 2>/dev/null | head -n 1)"
	echo "bindgen: $("$NMC_BINDGEN" --version 2>/dev/null)"
	for frag in $(nmc_flavour_fragments "$flavour" "$arch"); do
		echo "fragment: ${frag#"$NMC_ROOT"/} $(sha256sum <"$frag" | cut -c1-16)"
	done
}

nmc_kernel_key() {
	nmc_kernel_key_inputs "$1" "${2:-x86_64}" | sha256sum | cut -c1-12
}

# Build directory (O=) of a flavour's kernel for an architecture (default
# x86_64) for the current inputs.
nmc_kernel_dir() {
	local arch=${2:-x86_64} prefix=
	[ "$arch" = x86_64 ] || prefix=$arch-
	echo "$NMC_CACHE/kernels/$prefix$1-$(nmc_kernel_key "$1" "$arch")"
}

# The bootable image in a kernel build directory, per architecture.
nmc_kernel_image() {
	case ${1:-x86_64} in
	arm64) echo arch/arm64/boot/Image ;;
	*) echo arch/x86/boot/bzImage ;;
	esac
}

# Make variables that select the project's toolchain (and, for arm64, the
# architecture: LLVM cross-compiles without a GNU cross toolchain).
nmc_make_vars() {
	local arch=
	[ "${1:-x86_64}" = x86_64 ] || arch=" ARCH=$1"
	echo "LLVM=$NMC_LLVM RUSTC=$NMC_RUSTC BINDGEN=$NMC_BINDGEN$arch"
}

# nmc_tree_arch KDIR: the architecture a kernel build tree is configured
# for (x86_64 or arm64); fails for any other or without a .config.
nmc_tree_arch() {
	if grep -qx 'CONFIG_ARM64=y' "$1/.config" 2>/dev/null; then
		echo arm64
	elif grep -qx 'CONFIG_X86_64=y' "$1/.config" 2>/dev/null; then
		echo x86_64
	else
		return 1
	fi
}

# nmc_prepare ARCH KDIR [FLAVOUR]: the kernel a VM command boots, and the
# modules for it: with KDIR empty, the provisioned kernel of FLAVOUR
# (default; provisioned if need be)
# and the modules built against it; else the tree at KDIR, checked by
# scripts/check-kernel, and the modules built against it with the
# project's toolchain. Returns 125, the harness's status, on failure.
nmc_prepare() {
	local arch=$1 kdir=$2 flavour=${3:-default}
	if [ -z "$kdir" ]; then
		if "$NMC_ROOT/scripts/provision" --arch "$arch" --flavour "$flavour" --print-kdir >/dev/null 2>&1; then
			"$NMC_ROOT/scripts/provision" --arch "$arch" --flavour "$flavour" >/dev/null ||
				{ nmc_err "provisioning failed"; return 125; }
		else
			# The first run: its steps and the kernel build's progress
			# are shown, on stderr (stdout is the run's).
			nmc_log "the $NMC_RELEASE $arch kernel ($flavour) is not provisioned yet: provisioning it (packages, bindgen, the kernel build; 10 to 15 minutes on 2 cores, cached afterwards)" >&2
			"$NMC_ROOT/scripts/provision" --arch "$arch" --flavour "$flavour" >&2 ||
				{ nmc_err "provisioning failed"; return 125; }
			# The first module build against it takes half a minute:
			# shown as alive too (its output in the log, its tail on
			# failure).
			nmc_run_logged "$NMC_CACHE/logs/module-build.log" "make modules (nmiclock.ko and the samples)" \
				make -s -C "$NMC_ROOT" PROVISIONED=1 ARCH="$arch" FLAVOUR="$flavour" modules >&2 ||
				{ nmc_err "the module build failed"; return 125; }
			return 0
		fi
		make -s -C "$NMC_ROOT" PROVISIONED=1 ARCH="$arch" FLAVOUR="$flavour" modules || { nmc_err "the module build failed"; return 125; }
		return 0
	fi
	"$NMC_ROOT/scripts/check-kernel" "$kdir" >&2 ||
		{ nmc_err "$kdir lacks what nmiclock needs (above)"; return 125; }
	nmc_build_against "$kdir" "$arch" || { nmc_err "the module build against $kdir failed"; return 125; }
}

# nmc_tree_config KDIR OPTION: OPTION's value in KDIR's .config, quotes
# taken off (empty when unset).
nmc_tree_config() {
	sed -n "s/^$2=//p" "$1/.config" 2>/dev/null | sed 's/^"\(.*\)"$/\1/'
}

# nmc_version_code VERSION: 14.2.0 as 140200, as CONFIG_GCC_VERSION and
# CONFIG_CLANG_VERSION write it.
nmc_version_code() {
	echo "$1" | awk -F. '{ printf "%d%02d%02d\n", $1, $2, $3 }'
}

# nmc_tree_toolchain KDIR: the make variables that build modules against
# the tree at KDIR with the compilers it was built with: for a clang-built
# tree LLVM=-N (or LLVM=1) of the clang whose version is its
# CONFIG_CLANG_VERSION; for a GCC-built one CC= (and CROSS_COMPILE= for a
# cross-built one) of the gcc its CONFIG_CC_VERSION_TEXT names, and
# LIBCLANG_PATH of the release's LLVM for bindgen (it parses the C side
# with libclang whatever compiled the kernel); RUSTC= and BINDGEN= whose
# --version is the tree's CONFIG_RUSTC_VERSION_TEXT and
# CONFIG_BINDGEN_VERSION_TEXT (the project's, rustup's or the PATH's).
# Prints them on one line; on what it cannot find, prints one "missing:"
# line each on stderr, with the fix, and fails. Selects the tree's release.
nmc_tree_toolchain() {
	local kdir=$1 r vars= bad=0 c v want name cross= found
	r=$(nmc_tree_release "$kdir") && nmc_release_select "$r"
	if [ "$(nmc_tree_config "$kdir" CONFIG_CC_IS_CLANG)" = y ]; then
		want=$(nmc_tree_config "$kdir" CONFIG_CLANG_VERSION)
		found=
		for c in "$NMC_LLVM" "-${want%????}" ""; do
			v=$(clang$c -dumpversion 2>/dev/null) || continue
			[ "$(nmc_version_code "$v")" = "$want" ] || continue
			found=${c:-1}
			break
		done
		if [ -n "$found" ]; then
			vars="LLVM=$found"
		else
			echo "missing: clang $want (CONFIG_CLANG_VERSION), the tree's compiler: none of clang$NMC_LLVM, clang-${want%????}, clang on PATH is that version; fix: install it, or put it first on PATH" >&2
			bad=1
		fi
	else
		want=$(nmc_tree_config "$kdir" CONFIG_GCC_VERSION)
		name=$(nmc_tree_config "$kdir" CONFIG_CC_VERSION_TEXT)
		name=${name%% *}
		found=
		for c in "$name" "gcc-${want%????}" gcc; do
			v=$("$c" -dumpfullversion 2>/dev/null) || continue
			[ "$(nmc_version_code "$v")" = "$want" ] || continue
			found=$c
			break
		done
		if [ -n "$found" ]; then
			# A cross or triplet-named gcc: its binutils by the same prefix.
			case $found in *-gcc*) cross=" CROSS_COMPILE=${found%gcc*}" ;; esac
			vars="CC=$found$cross"
			[ -d "/usr/lib/llvm$NMC_LLVM/lib" ] && [ -z "${LIBCLANG_PATH-}" ] &&
				vars="$vars LIBCLANG_PATH=/usr/lib/llvm$NMC_LLVM/lib"
		else
			echo "missing: gcc $want (CONFIG_GCC_VERSION), the tree's compiler: none of $name, gcc-${want%????}, gcc is that version; fix: install it (Debian: gcc-${want%????})" >&2
			bad=1
		fi
	fi
	want=$(nmc_tree_config "$kdir" CONFIG_RUSTC_VERSION_TEXT)
	found=
	for c in "$NMC_RUSTC" "$HOME/.cargo/bin/rustc" "$(command -v rustc)"; do
		[ -n "$c" ] && [ "$("$c" --version 2>/dev/null)" = "$want" ] && { found=$c; break; }
	done
	if [ -n "$found" ]; then
		vars="$vars RUSTC=$found"
	else
		echo "missing: rustc '$want' (CONFIG_RUSTC_VERSION_TEXT), the one the tree was built with (crates of two rustc do not mix): not $NMC_RUSTC, rustup's or the PATH's; fix: install it (rustup toolchain install $(echo "$want" | awk '{ print $2 }')), or rebuild the tree with make RUSTC=$NMC_RUSTC" >&2
		bad=1
	fi
	want=$(nmc_tree_config "$kdir" CONFIG_BINDGEN_VERSION_TEXT)
	found=
	for c in "$NMC_BINDGEN" "$HOME/.cargo/bin/bindgen" "$(command -v bindgen)"; do
		[ -n "$c" ] && [ -x "$c" ] || continue
		[ -z "$want" ] || [ "$("$c" --version 2>/dev/null)" = "$want" ] && { found=$c; break; }
	done
	if [ -n "$found" ]; then
		vars="$vars BINDGEN=$found"
	else
		echo "missing: ${want:-bindgen} (CONFIG_BINDGEN_VERSION_TEXT), the tree's: not $NMC_BINDGEN, rustup's or the PATH's; fix: cargo install --locked bindgen-cli --version ${want#bindgen }" >&2
		bad=1
	fi
	[ "$bad" = 0 ] || return 1
	[ "$(nmc_tree_arch "$kdir")" = x86_64 ] || vars="$vars ARCH=$(nmc_tree_arch "$kdir")"
	echo "${vars# }"
}

# nmc_build_against KDIR ARCH: the modules built against the tree at KDIR
# with the tree's own toolchain (nmc_tree_toolchain; scripts/check-kernel
# checked it).
nmc_build_against() {
	local vars
	vars=$(nmc_tree_toolchain "$1") || return 1
	# shellcheck disable=SC2086
	make -s -C "$NMC_ROOT" KDIR="$1" $vars modules
}

# nmc_split_sections LOG OUT: the sections a run's guest printed ("== NAME"
# lines: End of test, config, stats, histogram, anomalies, percpu, series,
# trace, trace_nmiclock) into OUT/NAME.txt each (end_of_test.txt), the
# kernel's own console lines left out, as run-main and soak keep them for
# scripts/report.
nmc_split_sections() {
	sed -e 's/\r$//' "$1" 2>/dev/null | awk -v out="$2" '
	/^== / {
		f = ""
		if ($2 == "End") f = "end_of_test"
		else if ($2 ~ /^(config|stats|histogram|anomalies|percpu|series|trace|trace_nmiclock)$/) f = $2
		next
	}
	/^--- soak summary end$/ { f = ""; next }
	f == "end_of_test" && /End of test/ { sub(/^\[ *[0-9]+\.[0-9]+\] /, ""); print > (out "/" f ".txt"); next }
	f != "" && f != "end_of_test" && !/^\[ *[0-9]+\.[0-9]+\] / { print > (out "/" f ".txt") }'
}

# --- providers: --with PATH (run-main, soak, run-bench, zoo, vm-run) ---------
# A provider is another module that registers clocks with nmiclock
# (include/nmiclock.h): a directory, an out-of-tree module (its own Kbuild
# or Makefile) built against the run's kernel, or a .ko taken as built.

# nmc_with_check PATH: PATH can be a provider (a directory with a Kbuild or
# a Makefile, or a .ko file); else one line saying why, and false. Checks
# only what needs no kernel: for a script's options, before anything is
# provisioned or built.
nmc_with_check() {
	case $1 in
	'') nmc_err "--with needs a directory or a .ko"; return 1 ;;
	*.ko) [ -f "$1" ] || { nmc_err "--with $1: no such module file"; return 1; } ;;
	*)
		[ -d "$1" ] || { nmc_err "--with $1: neither a directory nor a .ko file"; return 1; }
		[ -f "$1/Kbuild" ] || [ -f "$1/Makefile" ] ||
			{ nmc_err "--with $1: no Kbuild or Makefile there (an out-of-tree module's directory)"; return 1; } ;;
	esac
}

# nmc_with_build KDIR VARS DIR OUT: the provider at DIR built in OUT (a
# copy of DIR, without what an earlier build left there) against the
# kernel tree at KDIR with the make variables VARS (the toolchain), with
# nmiclock's include/ on its include path (KCFLAGS, and NMICLOCK= for its
# Kbuild: samples/template/), nmiclock's Module.symvers for its symbols;
# prints the modules it built, one path a line. On a failed build: the
# compiler's first error lines and the command that reproduces it, on
# stderr, and false.
nmc_with_build() {
	local kdir=$1 vars=$2 dir=$3 out=$4 log lib abs keep
	log=$out/.nmiclock-with-build.log
	mkdir -p "$out" && (cd "$dir" && tar -cf - --exclude='*.o' --exclude='*.ko' --exclude='*.mod' \
		--exclude='*.mod.c' --exclude='.*.cmd' --exclude='*.rmeta' --exclude=modules.order \
		--exclude=Module.symvers --exclude='*_generated.rs' .) | tar -C "$out" -xf - ||
		{ nmc_err "--with $dir: cannot copy it to $out"; return 1; }
	# bindgen's libclang: the one of the toolchain's LLVM, as the kernel's
	# own rust/ build was made with (the Makefile does the same).
	lib=$(echo "$vars" | sed -n 's/.*LLVM=\(-[0-9]*\).*/\1/p')
	[ -z "$lib" ] || [ -n "${LIBCLANG_PATH-}" ] || [ ! -d "/usr/lib/llvm$lib/lib" ] ||
		export LIBCLANG_PATH=/usr/lib/llvm$lib/lib
	# shellcheck disable=SC2086
	if ! make -C "$kdir" M="$out" $vars NMICLOCK="$NMC_ROOT" \
		KBUILD_EXTRA_SYMBOLS="$NMC_ROOT/Module.symvers" KCFLAGS="-I$NMC_ROOT/include" \
		modules >"$log" 2>&1; then
		# The log kept (OUT goes with the run), its paths the user's.
		abs=$(cd "$dir" && pwd)
		mkdir -p "$NMC_CACHE/logs" && keep=$NMC_CACHE/logs/with-$(basename "$abs").log &&
			sed "s|$out/|$abs/|g" "$log" >"$keep" || keep=$log
		nmc_err "--with $dir does not build against $kdir; its first errors:"
		{ grep -m 8 -E '(error|Error)(\[E[0-9]+\])?:|\*\*\*' "$keep" || tail -n 8 "$keep"; } | sed 's/^/    /' >&2
		nmc_err "the whole log: $keep; to build it so by hand:"
		printf '    make -C %s M=%s %s NMICLOCK=%s KBUILD_EXTRA_SYMBOLS=%s/Module.symvers KCFLAGS=-I%s/include modules\n' \
			"$kdir" "$abs" "$vars" "$NMC_ROOT" "$NMC_ROOT" "$NMC_ROOT" >&2
		return 1
	fi
	sed -n 's|\.o$|.ko|p' "$out/modules.order" 2>/dev/null | while IFS= read -r ko; do
		case $ko in /*) ;; *) ko=$out/$ko ;; esac
		[ -f "$ko" ] && echo "$ko"
	done | grep . || { nmc_err "--with $dir: its build made no module (no obj-m in its Kbuild?)"; return 1; }
}

# nmc_ko_info KO: what says which kernel a module was built for: its
# vermagic, its ELF machine and the size of its struct module (the
# kernel's .config changes that where the vermagic stays: a debug
# kernel's lockdep fields), one line.
nmc_ko_info() {
	local magic machine size
	magic=$(tr '\0' '\n' <"$1" | sed -n 's/^vermagic=//p' | head -n 1)
	machine=$(od -An -j18 -N2 -tu2 "$1" | tr -d ' ')
	size=$(readelf -S -W "$1" 2>/dev/null | sed -n 's/.* \.gnu\.linkonce\.this_module *[A-Z]* *[0-9a-f]* *[0-9a-f]* *\([0-9a-f]*\).*/\1/p')
	echo "vermagic '$magic', ELF machine $machine, struct module 0x$size bytes"
}

# nmc_with_compatible KO REF: KO was built for the kernel REF (nmiclock.ko,
# just built for the run's kernel) was; else one line and false.
nmc_with_compatible() {
	local want got
	want=$(nmc_ko_info "$2") got=$(nmc_ko_info "$1")
	[ "$got" = "$want" ] && return 0
	nmc_err "--with $1 was built for another kernel: $got; this kernel's modules: $want"
	return 1
}

# The static arm64 busybox for arm64 guests, from Debian's
# busybox-static:arm64 (scripts/provision --arch arm64 fetches it).
NMC_ARM64_BUSYBOX=$NMC_CACHE/arm64/busybox
# nmc_adjtimex: the path of Debian's adjtimex, fetched from the machine's
# apt sources into the cache and unpacked, not installed (its package sets
# the machine's clock frequency at boot), for guests that run this
# machine's userspace (vm-run --runner vng) on a machine without it: the
# suite slews the clock with it, and checks NTP's frequency is left as
# found. Fails with one line.
nmc_adjtimex() {
	local d=$NMC_CACHE/adjtimex
	if [ ! -x "$d/x/sbin/adjtimex" ]; then
		rm -rf "$d" && mkdir -p "$d" || { nmc_err "cannot create $d"; return 1; }
		nmc_log "fetching Debian's adjtimex for the guest (apt-get download, not installed)" >&2
		(cd "$d" && apt-get download adjtimex) >"$d/download.log" 2>&1 &&
			dpkg-deb -x "$d"/adjtimex_*.deb "$d/x" ||
			{ nmc_err "apt-get download adjtimex failed (log: $d/download.log)"; return 1; }
	fi
	echo "$d/x/sbin/adjtimex"
}

# nmc_results_host [ARCH]: one line naming where a run measured: the
# host's CPU and the version of the QEMU that runs ARCH's guests (default
# x86_64; the environment itself, qemu-tcg or kvm, is the guest's to say).
nmc_results_host() {
	local cpu qemu
	cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
	qemu=$(qemu-system-$(nmc_uname_m "${1:-x86_64}") --version 2>/dev/null | head -n 1)
	echo "host: $(nproc) CPUs, ${cpu:-unknown CPU}; ${qemu:-QEMU version unknown}"
}

# nmc_zoo_table ARCHES KTAP...: scripts/zoo's table from its guests' KTAP
# (each file named ARCH.ktap; ARCHES the architectures in the order of
# their columns): one row per target, the case's description naming the
# commit, the diagnostics before its result line saying what was found.
# scripts/report draws it; scripts/test-report checks that its fixture is
# what this makes of the fixture's KTAP.
nmc_zoo_table() {
	local arches=$1
	shift
	awk -v arches="$arches" '
	function cell(verdict, why, found,   c) {
		if (verdict ~ /XFAIL/) {
			c = why; sub(/^caught after /, "caught, ", c)
			return c (found != "" ? "; " found : "")
		}
		if (verdict ~ /SKIP/)
			return (why ~ /^negative control/ ? "not caught, as it must not be (" why ")" : "not run: " why)
		if (verdict ~ /^ok/) return "survived" (found != "" ? " (" found ")" : "")
		return "FAILED: " why
	}
	FNR == 1 { arch = FILENAME; sub(/.*\//, "", arch); sub(/\.ktap$/, "", arch); found = ""; why = "" }
	/^# found: / { found = substr($0, 10); next }
	/^# survived / { why = substr($0, 3); next }
	/^(ok|not ok) [0-9]+ zoo: / {
		line = $0
		verdict = line; sub(/^[^#]*# ?/, "", verdict)
		if (line !~ /#/) verdict = (line ~ /^ok/ ? "ok" : "not ok")
		else if (line ~ /^not ok/) verdict = "not ok " verdict
		else if (verdict !~ /^(XFAIL|SKIP)/) verdict = "ok"
		desc = line; sub(/^(ok|not ok) [0-9]+ zoo: /, "", desc); sub(/ #.*/, "", desc)
		commit = desc; sub(/ .*/, "", commit)
		what = desc; sub(/^[^ ]+ /, "", what)
		reason = line; sub(/^[^#]*# (XFAIL|SKIP) ?/, "", reason)
		if (reason == line) reason = why
		key = what
		if (!(key in seen)) { seen[key] = 1; order[++n] = key; com[key] = commit }
		res[key, arch] = cell(verdict, reason, found)
		found = ""; why = ""
	}
	END {
		split(arches, a, " ")
		for (i = 1; i <= n; i++) {
			k = order[i]
			printf "%s  %s\n", com[k], k
			for (j = 1; j in a; j++)
				printf "    %-7s %s\n", a[j] ":", ((k, a[j]) in res ? res[k, a[j]] : "not run")
		}
	}' "$@"
}

# nmc_count N: a count with an optional k/M/G suffix, as a plain number
# (soak's and campaign's --reads).
nmc_count() {
	local n m
	case $1 in
	*[kK]) n=${1%?} m=1000 ;;
	*M) n=${1%?} m=1000000 ;;
	*G) n=${1%?} m=1000000000 ;;
	*) n=$1 m=1 ;;
	esac
	case $n in '' | *[!0-9]*) return 1 ;; esac
	echo $((n * m))
}

# nmc_seconds D: a duration with an optional s/m/h/d suffix, in seconds
# (soak's and campaign's --duration).
nmc_seconds() {
	local n m
	case $1 in
	*s) n=${1%?} m=1 ;;
	*m) n=${1%?} m=60 ;;
	*h) n=${1%?} m=3600 ;;
	*d) n=${1%?} m=86400 ;;
	*) n=$1 m=1 ;;
	esac
	case $n in '' | *[!0-9]*) return 1 ;; esac
	echo $((n * m))
}

# nmc_campaign_table DIR: scripts/campaign's table of the cells in DIR
# (plan.txt, cells/CLOCK.DISTURBANCE/stats.txt): the grid, a row a clock
# and a column a disturbance (S SUCCESS, F FAILURE, I INCONCLUSIVE, ?
# not run, . not in the plan), then a line a cell: its verdict, NMI
# reads, window hits of those needed, the worst step back (per CPU or
# across CPUs, ns), the time to the first anomaly, and the promise judged
# by (steps back allowed per CPU/across CPUs, ns, or any; the reference's
# rate or not), and the disturbance's rounds.
nmc_campaign_table() {
	local d=$1 c f
	while IFS= read -r c; do
		f=$d/cells/${c/\//.}
		echo "cell $c"
		[ -e "$f/stats.txt" ] && sed -n -e 's/^\(verdict\|nmi_samples\|window_hits_local\|window_hits_remote\|window_hits_needed\|max_backstep_ns\|max_cross_backstep_ns\|first_anomaly_ns\|target_promise\|kernel_update_coverage\|steps_back_allowed\|torn_reads\|reference_mismatches\|backwards\|cross_cpu_backwards\|target_stalls\|clock_stalls\|unpromised_backwards\|unpromised_cross_cpu_backwards\|errors\): /\1 /p' "$f/stats.txt"
		[ -e "$f/disturbance.txt" ] && sed -n '1s/^/rounds /p; s/^FAILED: /failed /p' "$f/disturbance.txt"
	done <"$d/plan.txt" | awk '
		function flush() {
			if (cell == "") return
			n++; name[n] = cell
			split(cell, p, "/")
			if (!(p[1] in rowi)) { rowi[p[1]] = ++nr; row[nr] = p[1] }
			if (!(p[2] in coli)) { coli[p[2]] = ++nc; col[nc] = p[2] }
			v = ("verdict" in k) ? k["verdict"] : "-"
			grid[p[1], p[2]] = (v == "SUCCESS") ? "S" : (v == "FAILURE") ? "F" : (v == "INCONCLUSIVE") ? "I" : "?"
			if (v == "-") { line[n] = sprintf("%-44s %s", cell, "not run"); delete k; return }
			back = k["max_backstep_ns"] + 0
			if (k["max_cross_backstep_ns"] + 0 > back) back = k["max_cross_backstep_ns"] + 0
			first = (k["first_anomaly_ns"] + 0 < 0) ? "-" : sprintf("%.3f s", k["first_anomaly_ns"] / 1e9)
			pr = k["target_promise"]
			gsub(/per_cpu_step_back_ns=/, "", pr); sub(/ cross_cpu_step_back_ns=/, "/", pr)
			sub(/ raw_rate=/, " rate:", pr); sub(/ \(.*$/, "", pr); sub(/ at_clocksource_switch=its_length/, "+cs", pr)
			if (pr == "") pr = "none/none rate:yes"
			note = ""
			if (k["kernel_update_coverage"] ~ /not/) note = note " (" k["kernel_update_coverage"] ")"
			if (k["unpromised_backwards"] + k["unpromised_cross_cpu_backwards"] > 0)
				note = note " unpromised back " k["unpromised_backwards"] "/" k["unpromised_cross_cpu_backwards"]
			if (k["steps_back_allowed"] + 0 > 0) note = note " allowed back " k["steps_back_allowed"]
			kinds = ""
			split("torn_reads reference_mismatches backwards cross_cpu_backwards target_stalls clock_stalls", ak, " ")
			for (a = 1; a <= 6; a++) if (k[ak[a]] + 0 > 0) kinds = kinds " " ak[a] "=" k[ak[a]]
			if (kinds != "") note = note " anomalies:" kinds
			if ("failed" in k) note = note " DISTURBANCE FAILED: " k["failed"]
			line[n] = sprintf("%-44s %-12s %10d %7d/%-6d %12d %9s  %-22s %s%s", cell, v, k["nmi_samples"],
				k["window_hits_local"] + k["window_hits_remote"], k["window_hits_needed"], back, first, pr,
				k["rounds"], note)
			delete k
		}
		$1 == "cell" { flush(); cell = $2; next }
		{ key = $1; $1 = ""; sub(/^ /, ""); k[key] = $0 }
		END {
			flush()
			printf "%-24s", "clock"
			for (j = 1; j <= nc; j++) printf " %-10s", col[j]
			print ""
			for (i = 1; i <= nr; i++) {
				printf "%-24s", row[i]
				for (j = 1; j <= nc; j++) printf " %-10s", ((row[i], col[j]) in grid) ? grid[row[i], col[j]] : "."
				print ""
			}
			print "(S SUCCESS, F FAILURE, I INCONCLUSIVE: no anomaly, too few window hits; ? not run, . not in the plan)"
			print ""
			printf "%-44s %-12s %10s %14s %12s %9s  %-22s %s\n", "clock/disturbance", "verdict", "NMI reads",
				"hits/needed", "worst back ns", "1st anom.", "promise (back ns)", "disturbance"
			for (i = 1; i <= n; i++) print line[i]
		}'
}

# nmc_module_version: what a results section names as the module it
# measured: nmiclock's version (rust/nmiclock_main.rs's VERSION) and the
# checkout's commit, "-dirty" with uncommitted changes outside
# Documentation/ (which --results itself writes).
nmc_module_version() {
	local v c
	v=$(sed -n 's/^const VERSION: &str = "\(.*\)";$/\1/p' "$NMC_ROOT/rust/nmiclock_main.rs")
	c=$(git -C "$NMC_ROOT" rev-parse --short=12 HEAD 2>/dev/null) &&
		[ -z "$(git -C "$NMC_ROOT" status --porcelain -- . ':!Documentation' 2>/dev/null)" ] || c=${c:+$c-dirty}
	echo "nmiclock ${v:-unknown}${c:+ (commit $c)}"
}

# nmc_results_kernel ARCH [KDIR [FLAVOUR]]: "kernel RELEASE (how it was
# had)": the release the guest booted, read from the tree's
# include/config/kernel.release (KDIR: your own tree; else the
# provisioned one of the selected release), and the module's version.
nmc_results_kernel() {
	local arch=$1 kdir=${2-} flavour=${3:-default} rel how
	if [ -n "$kdir" ]; then
		how="your own tree $kdir"
	else
		kdir=$("$NMC_ROOT/scripts/provision" --arch "$arch" --flavour "$flavour" --print-kdir 2>/dev/null)
		how="Debian's $NMC_KERNEL_PKG, provisioned, $flavour"
	fi
	rel=$(cat "$kdir/include/config/kernel.release" 2>/dev/null)
	echo "kernel ${rel:-unknown} ($how), $(nmc_module_version)"
}

# nmc_cargo_own DIR: makes DIR, a cargo target directory under the cache
# that every checkout shares, build this checkout's core afresh when
# another checkout built it last. Cargo judges a path package fresh by
# mtimes: a build from another checkout, newer than this one's edits,
# passes for this one's (and run-host would run the other checkout's
# binary). Only the core's fingerprints go (in every profile), so that
# cargo rebuilds the core; its dependencies stay. OWNER, if given, is the
# directory that builds there instead of the checkout (run-tests' copy of
# the core).
nmc_cargo_own() {
	local stamp=$1/.nmiclock-checkout owner=${2:-$NMC_ROOT}
	[ "$(cat "$stamp" 2>/dev/null)" = "$owner" ] && return 0
	rm -rf "$1"/*/.fingerprint/nmiclock-core-* 2>/dev/null
	mkdir -p "$1" && printf '%s\n' "$owner" >"$stamp"
}

# nmc_results_update SECTION FRAGMENT: replaces the section SECTION of
# Documentation/results.rst (the lines between ".. results: SECTION" and
# the next ".. end results") with the file FRAGMENT, and says so.  A
# section the file does not have is an error: nothing is changed.
nmc_results_update() {
	local section=$1 frag=$2 doc=$NMC_ROOT/Documentation/results.rst tmp
	grep -qxF ".. results: $section" "$doc" ||
		{ nmc_err "$doc has no section '.. results: $section'"; return 1; }
	tmp=$(mktemp) || return 1
	if awk -v sec=".. results: $section" -v frag="$frag" '
		$0 == sec {
			print; print ""
			while ((getline l < frag) > 0) print l
			print ""; skip = 1; next
		}
		skip && $0 == ".. end results" { skip = 0 }
		!skip { print }' "$doc" >"$tmp"; then
		cat "$tmp" >"$doc"
		rm -f "$tmp"
		nmc_log "updated section '$section' of $doc"
	else
		rm -f "$tmp"
		nmc_err "could not rewrite $doc"
		return 1
	fi
}

# nmc_bench_promises ARCH DIR: prints each of nmiclock's performance
# promises with its figure from the run-bench output in DIR (table.txt,
# consumer.txt: nmiclock_consumer.ko's lines, refscale.txt: bench.sh's
# line comparing refscale with our table) and whether it holds; returns 0
# when every one holds, 1 when one does not or was not measured. Each
# figure is a ratio taken within the one run (under QEMU TCG time is
# emulated: only such ratios compare):
#  - the exported clock over the latch read called the same way, out of
#    line (nmiclock_sched_clock() / latch/COUNTER_ordered (call)), in each
#    phase: at most 1.25;
#  - from another module (nmiclock_consumer.ko), nmiclock_sched_clock()
#    over sched_clock(): at most 0.8 on x86_64, 0.7 on arm64, in every
#    load (the highest is the figure);
#  - the latch read over the unprotected read, both over the ordered
#    counter, in each phase: at most 1.25;
#  - acct's irqsave over its cmpxchg (cmpxchg no slower), tick and apply,
#    in each phase: at least 1.00;
#  - refscale's ktime_get_real_fast_ns() over our table's, idle, the 10th
#    percentile of each's runs: within 10 % (0.90 to 1.10). Not the
#    medians: the two are timed one after the other, and under QEMU TCG the
#    host runs the guest at one of two speeds for seconds at a time, so
#    that the medians can fall in different speeds (bench.sh's line has
#    both).
# The table's ratios are its "ratio" column (each row over sched_clock(),
# or acct's over cmpxchg, median over the runs), so a promise between two
# rows divides their ratios.
nmc_bench_promises() {
	local arch=$1 dir=$2 consumer_max
	case $arch in arm64) consumer_max=0.70 ;; *) consumer_max=0.80 ;; esac
	awk -v cmax="$consumer_max" '
		function row(phase, name) { return ((phase SUBSEP name) in ratio) ? ratio[phase, name] : "" }
		function verdict(what, fig, lo, hi,   ok, bound) {
			bound = lo == "" ? "at most " hi : hi == "" ? "at least " lo : lo " to " hi
			if (fig == "") { ok = "NOT MEASURED"; bad++ }
			else if ((lo != "" && fig + 0 < lo + 0) || (hi != "" && fig + 0 > hi + 0)) { ok = "DOES NOT HOLD"; bad++ }
			else ok = "holds"
			printf "promise  %-68s %6s  %-14s %s\n", what, fig == "" ? "-" : sprintf("%.3f", fig), bound, ok
			n++
		}
		function over(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "" : a / b }
		FILENAME ~ /table\.txt$/ && ($1 == "idle" || $1 == "updaters") && NF >= 8 {
			name = $2
			for (i = 3; i <= NF - 6; i++) name = name " " $i
			ratio[$1, name] = $(NF - 1)
			if (name ~ /^latch\/[a-z0-9]+_ordered \(call\)$/) call = name
			if (name ~ /^latch\/[a-z0-9]+_ordered$/) latch = name
			if (name ~ /^unprotected\/[a-z0-9]+_ordered$/) unprot = name
			next
		}
		FILENAME ~ /consumer\.txt$/ && /^consumer [0-9]+: / {
			loads++
			if (match($0, / ratio [0-9.]+ /)) {
				r = substr($0, RSTART + 7, RLENGTH - 8) + 0
				if (cmeasured == "" || r > worst) worst = r
				cmeasured++
			}
			next
		}
		FILENAME ~ /refscale\.txt$/ && /^refscale vs nmiclock bench/ {
			if (match($0, /percentile refscale [0-9.]+,/)) theirs = substr($0, RSTART + 20, RLENGTH - 21)
			if (match($0, /percentile .*\(idle\) [0-9.]+/)) ours = substr($0, RSTART, RLENGTH)
			sub(/.*\(idle\) /, "", ours)
			next
		}
		END {
			if (call == "") call = "latch/?_ordered (call)"
			if (latch == "") latch = "latch/?_ordered"
			if (unprot == "") unprot = "unprotected/?_ordered"
			for (p = 1; p <= 2; p++) {
				ph = p == 1 ? "idle" : "updaters"
				verdict("nmiclock_sched_clock() / " call ", " ph,
					over(row(ph, "nmiclock_sched_clock()"), row(ph, call)), "", "1.25")
			}
			verdict("nmiclock_sched_clock() / sched_clock() from a module (" loads + 0 " loads)",
				(cmeasured && cmeasured == loads) ? worst : "", "", cmax)
			for (p = 1; p <= 2; p++) {
				ph = p == 1 ? "idle" : "updaters"
				verdict(latch " / " unprot ", " ph, over(row(ph, latch), row(ph, unprot)), "", "1.25")
			}
			for (p = 1; p <= 2; p++) {
				ph = p == 1 ? "idle" : "updaters"
				verdict("acct irqsave / cmpxchg (tick), " ph, row(ph, "acct irqsave (tick)"), "1.00", "")
				verdict("acct irqsave / cmpxchg (apply), " ph, row(ph, "acct irqsave (apply)"), "1.00", "")
			}
			verdict("refscale / bench, ktime_get_real_fast_ns(), idle, 10th percentiles", over(theirs, ours), "0.90", "1.10")
			printf "promises: %d of %d hold\n", n - bad, n
			exit bad ? 1 : 0
		}' "$dir/table.txt" "$dir/consumer.txt" "$dir/refscale.txt"
}

# nmc_console_mended FILE: a guest's console log with every line of the
# guest's that a kernel message cut into joined again. The kernel prints
# on the same serial port as the guest's shell, and a message that comes
# while the guest is writing a line lands inside it: "nmiclock-vm-7f66"
# then "[    1.656173] clocksource: Switched to clocksource tsc" and the
# line's rest, "d2e94827: exit 0", on the next line. A line with a kernel
# timestamp after its start is held back, and what came before the
# timestamp is joined to the line that follows (the message's line goes).
nmc_console_mended() {
	awk '{
		if (held != "") { $0 = held $0; held = "" }
		if (match($0, /\[ *[0-9]+\.[0-9]+\] /) && RSTART > 1) { held = substr($0, 1, RSTART - 1); next }
		print
	}
	END { if (held != "") print held }' "$1"
}
