# Sourced by the set-up scripts: `apt_get ARGS…` runs apt-get once the apt/dpkg locks are free,
# waiting for another package manager (unattended-upgrades on a fresh machine, a second set-up
# script) for at most $APT_LOCK_WAIT_S seconds, and saying so once on stderr. apt-get's own
# DPkg::Lock::Timeout covers the moment between the check and the start.
#
# Settings: APT_LOCK_WAIT_S (default 600), APT_LOG_TAG (the prefix of the message), APT_LOG
# (apt-get's own output is appended there when set), APT_LOCK_FILES and APT_GET (the lock files
# checked and the program run: tests set them).
APT_LOCK_WAIT_S=${APT_LOCK_WAIT_S:-600}
APT_LOCK_FILES=${APT_LOCK_FILES:-/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock}
APT_GET=${APT_GET:-apt-get}

# The holder of the first lock that is taken (the locks are fcntl locks, as apt and dpkg take
# them); nothing when all are free.
apt_lock_holder() {
  python3 - $APT_LOCK_FILES <<'PY'
import fcntl, os, struct, sys
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        continue
    try:
        query = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)
        kind, _, _, _, pid = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, query))
    finally:
        os.close(fd)
    if kind != fcntl.F_UNLCK:
        print(f"{path} (pid {pid})")
        break
PY
}

apt_get() {
  local start=$SECONDS holder said=""
  while holder=$(apt_lock_holder) && [[ -n $holder ]]; do
    if [[ -z $said ]]; then
      printf '[%s] waiting for the apt/dpkg lock %s, up to %s s\n' \
        "${APT_LOG_TAG:-setup}" "$holder" "$APT_LOCK_WAIT_S" >&2
      said=1
    fi
    if (( SECONDS - start >= APT_LOCK_WAIT_S )); then
      printf '[%s] the apt/dpkg lock %s is still held after %s s; run this again when the other package manager has finished\n' \
        "${APT_LOG_TAG:-setup}" "$holder" "$APT_LOCK_WAIT_S" >&2
      return 100
    fi
    sleep 1
  done
  [[ -n $said ]] && printf '[%s] the apt/dpkg lock is free after %s s\n' \
    "${APT_LOG_TAG:-setup}" "$(( SECONDS - start ))" >&2
  if [[ -n ${APT_LOG:-} ]]; then
    "$APT_GET" -o "DPkg::Lock::Timeout=$APT_LOCK_WAIT_S" "$@" >>"$APT_LOG" 2>&1
  else
    "$APT_GET" -o "DPkg::Lock::Timeout=$APT_LOCK_WAIT_S" "$@"
  fi
}
