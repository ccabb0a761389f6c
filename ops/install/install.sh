#!/bin/sh
# gpupool's install script for a GPU owner's machine. The pool's coordinator serves it at
# /dist/install.sh (`gpupool coordinator --dist DIR`); `gpupool admin enroll TEAM` prints the one
# command that downloads it, checks it against the SHA-256 written in that command, and runs it:
#
#   sh install.sh --url URL --binary gpupool-VERSION-linux-ARCH --sha256 HEX [--ca-sha256 HEX] [options]
#
# What it does, in order, and it stops at the first failure:
#   1. downloads the static gpupool file from URL/dist/ (curl, or else wget; busybox's wget only over
#      plain HTTP: its TLS needs SHA-1 handshake signatures, which OpenSSL 3 servers refuse) and
#      checks its SHA-256 against --sha256 (sha256sum: coreutils' or busybox's). With --ca-sha256,
#      first the pool's CA certificate (URL/dist/ca.pem), checked the same way, which the downloads
#      after it and the worker then trust. Integrity never rests on the transport: a file whose
#      SHA-256 is not the pinned one stops the script before anything is installed;
#   2. reads the enrollment token: from --token-file FILE, else from the terminal (not echoed), else
#      from standard input. It is written to a 0600 file and handed on as --token-file only: never
#      on a command line, never in the environment;
#   3. installs the binary as PREFIX/bin/gpupool and prints what the machine would share;
#   4. with systemd: `gpupool worker install` (system-wide as root, --user otherwise); without it (a
#      container) or with --no-service: starts `gpupool worker --share` in the background (its pid
#      and log are printed), or in the foreground with --foreground.
#
# Options: --prefix DIR (default /usr/local as root, ~/.local otherwise; the binary goes in DIR/bin),
# --data DIR (the token, the CA, the worker's spool and log; default /var/lib/gpupool as root,
# ~/.local/share/gpupool otherwise), --runtime podman|docker|
# process (default: podman, else docker), --unsafe-process-runtime (with --runtime process: jobs run
# as plain processes, no isolation), --name NAME, --token-file FILE, --no-service, --foreground.
# Arguments after `--` go to `gpupool worker --share` (not to the systemd service).
set -eu

say() { printf 'gpupool install: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

url='' binary='' sha='' ca_sha='' prefix='' data='' runtime='' unsafe='' name='' token_file='' no_service='' foreground=''
while [ $# -gt 0 ]; do
  case $1 in
    --url) url=${2:?--url needs a value}; shift 2 ;;
    --binary) binary=${2:?--binary needs a value}; shift 2 ;;
    --sha256) sha=${2:?--sha256 needs a value}; shift 2 ;;
    --ca-sha256) ca_sha=${2:?--ca-sha256 needs a value}; shift 2 ;;
    --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
    --data) data=${2:?--data needs a value}; shift 2 ;;
    --runtime) runtime=${2:?--runtime needs a value}; shift 2 ;;
    --unsafe-process-runtime) unsafe=1; shift ;;
    --name) name=${2:?--name needs a value}; shift 2 ;;
    --token-file) token_file=${2:?--token-file needs a value}; shift 2 ;;
    --no-service) no_service=1; shift ;;
    --foreground) foreground=1; no_service=1; shift ;;
    --) shift; break ;;
    *) die "unknown option '$1' (read the top of this script)" ;;
  esac
done
{ [ -n "$url" ] && [ -n "$binary" ] && [ -n "$sha" ]; } || die "needs --url, --binary and --sha256 (from gpupool admin enroll)"
case $binary in
  gpupool-*-linux-*) ;;
  *) die "--binary '$binary' is not a gpupool-VERSION-linux-ARCH name" ;;
esac
case $binary in */* | *..*) die "--binary '$binary' is not a plain file name" ;; esac
url=${url%/}

if [ "$(id -u)" = 0 ]; then
  : "${prefix:=/usr/local}" "${data:=/var/lib/gpupool}"
else
  [ -n "${HOME:-}" ] || die "HOME is not set"
  : "${prefix:=$HOME/.local}" "${data:=$HOME/.local/share/gpupool}"
fi
if [ -z "$runtime" ]; then
  if command -v podman > /dev/null 2>&1; then runtime=podman
  elif command -v docker > /dev/null 2>&1; then runtime=docker
  else die "neither podman nor docker is installed: jobs run in containers (docs/worker.md); --runtime chooses"
  fi
fi

umask 077
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# fetch PATH FILE: URL/PATH into FILE, trusting the pool's CA once it is checked.
ca_file=
fetch() {
  if command -v curl > /dev/null 2>&1; then
    if [ -n "$ca_file" ]; then curl -fsSL --cacert "$ca_file" -o "$2" "$url/$1"
    elif [ "${3:-}" = pinned ]; then curl -fsSLk -o "$2" "$url/$1"
    else curl -fsSL -o "$2" "$url/$1"
    fi
  elif command -v wget > /dev/null 2>&1; then
    # busybox's wget checks no certificate at all; the pinned SHA-256 below is what counts.
    if [ -n "$ca_file" ] || [ "${3:-}" = pinned ]; then
      if wget --help 2>&1 | grep -q -- --ca-certificate && [ -n "$ca_file" ]; then
        wget -q --ca-certificate="$ca_file" -O "$2" "$url/$1"
      else
        wget -q --no-check-certificate -O "$2" "$url/$1"
      fi
    else
      wget -q -O "$2" "$url/$1"
    fi || {
      case $url in https:*) ! wget --help 2>&1 | grep -q BusyBox ||
        say "busybox's wget needs a TLS handshake signed with SHA-1, which an OpenSSL 3 server refuses: install curl" ;; esac
      die "cannot download $url/$1"
    }
  else
    die "neither curl nor wget is installed: one of them downloads gpupool"
  fi || die "cannot download $url/$1"
}

# check FILE HEX WHAT: stops unless FILE's SHA-256 is HEX.
check() {
  command -v sha256sum > /dev/null 2>&1 || die "sha256sum is missing (coreutils or busybox)"
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || die "$3 does not match the SHA-256 in the command you ran (got $got, expected $2): nothing was installed"
}

if [ -n "$ca_sha" ]; then
  fetch dist/ca.pem "$tmp/ca.pem" pinned
  check "$tmp/ca.pem" "$ca_sha" "the pool's CA certificate"
  ca_file=$tmp/ca.pem
fi
say "downloading $binary from $url"
fetch "dist/$binary" "$tmp/gpupool"
check "$tmp/gpupool" "$sha" "$binary"
chmod 0755 "$tmp/gpupool"
"$tmp/gpupool" version > /dev/null || die "$binary does not run on this machine ($(uname -m))"

# The token: a file of the owner's, the terminal, or standard input; only ever in files.
token=
if [ -n "$token_file" ]; then
  IFS= read -r token < "$token_file" || [ -n "$token" ] || die "cannot read the token from $token_file"
elif [ -t 0 ]; then
  printf 'Enrollment token (from your pool admin; not shown): ' >&2
  stty -echo 2> /dev/null || true
  IFS= read -r token || true
  stty echo 2> /dev/null || true
  printf '\n' >&2
else
  IFS= read -r token || [ -n "$token" ] || true
fi
case $token in
  gpp_*) ;;
  *) die "no enrollment token read (expected gpp_...): pass --token-file FILE, type it, or pipe it in" ;;
esac

mkdir -p "$prefix/bin" "$data"
printf '%s\n' "$token" > "$data/enroll.token"
token=
cp "$tmp/gpupool" "$prefix/bin/gpupool.new"
chmod 0755 "$prefix/bin/gpupool.new"
mv -f "$prefix/bin/gpupool.new" "$prefix/bin/gpupool"
bin=$prefix/bin/gpupool
say "installed $bin ($("$bin" version))"
ca_cert=
if [ -n "$ca_file" ]; then
  ca_cert=$data/ca.pem
  cp "$ca_file" "$ca_cert"
  chmod 0644 "$ca_cert"
fi
# gpupool's global options first: the pool's CA when it has its own.
with_ca() {
  if [ -n "$ca_cert" ]; then "$bin" --ca-cert "$ca_cert" "$@"; else "$bin" "$@"; fi
}

# The worker's options: the runtime, then the owner's, then those after `--`.
[ -z "$name" ] || set -- --name "$name" "$@"
[ -z "$unsafe" ] || set -- --unsafe-process-runtime "$@"
set -- --runtime "$runtime" "$@"
say "what this machine shares:"
"$bin" worker "$@" >&2 || say "(gpupool worker could not tell; the worker says why when it starts)"

service=''
if [ -z "$no_service" ] && [ -d /run/systemd/system ] && command -v systemctl > /dev/null 2>&1; then
  service=1
  if [ -n "$unsafe" ]; then
    say "--runtime process is not for a service: the worker runs without one"
    service=''
  elif [ -n "$ca_cert" ]; then
    say "the pool has its own CA, which the systemd service cannot be given yet: the worker runs without one"
    service=''
  fi
fi
if [ -n "$service" ]; then
  if [ "$(id -u)" = 0 ]; then
    with_ca worker install --coordinator "$url" --token-file "$data/enroll.token" --runtime "$runtime" ||
      die "gpupool worker install failed (above); the binary is in $bin"
  else
    with_ca worker install --user --coordinator "$url" --token-file "$data/enroll.token" --runtime "$runtime" ||
      die "gpupool worker install failed (above); the binary is in $bin"
  fi
  say "done: the worker runs as the service gpupool-worker"
  exit 0
fi

if [ -z "$no_service" ] && ! [ -d /run/systemd/system ]; then
  say "no systemd here (a container?): the worker runs without a service"
fi
rm -rf "$tmp"
trap - EXIT INT TERM
set -- worker --share --coordinator "$url" --token-file "$data/enroll.token" --work-dir "$data/worker" "$@"
[ -z "$ca_cert" ] || set -- --ca-cert "$ca_cert" "$@"
if [ -n "$foreground" ]; then
  say "starting the worker in the foreground (Ctrl-C or SIGTERM drains it)"
  exec "$bin" "$@"
fi
nohup "$bin" "$@" < /dev/null > "$data/worker.log" 2>&1 &
pid=$!
echo "$pid" > "$data/worker.pid"
say "the worker runs in the background: pid $pid, log $data/worker.log; stop it with kill $pid (it drains first)"
