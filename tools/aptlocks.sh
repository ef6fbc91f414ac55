# shellcheck shell=bash
# apt-get that waits for another apt-get or dpkg instead of failing at once.
# Sourced by install.sh, whose `log` it uses; tests/unit/project/
# test_aptlocks.py runs it against locks and an apt-get of its own.
#
# A fresh machine's first minutes often run an apt-get of their own
# (unattended-upgrades, cloud-init), and apt-get gives up at once on a lock
# another one holds. Its DPkg::Lock::Timeout waits only for dpkg's two locks
# (lock-frontend and lock: debSystem::Lock in apt's source); the lists lock
# `apt-get update` takes and the archives lock of a download are tried once
# (pkgAcquire::GetLock), which is how `make test` once failed on a fresh
# machine with /var/lib/apt/lists/lock held. So apt_get waits while any of
# them is held, before it runs apt-get and again when apt-get failed because
# another took one in between, up to APT_LOCK_WAIT seconds in all.
#
# apt and dpkg lock with fcntl(F_SETLK): flock(1) neither sees nor takes
# those locks, and fuser(1) also names a process that merely has the file
# open. So a non-blocking fcntl lock of our own, let go at once, tells
# whether one is held, and /proc/locks by whom.
APT_LOCK_WAIT=900
APT_LOCKS=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock
  /var/lib/apt/lists/lock /var/cache/apt/archives/lock)

# Prints the first of APT_LOCKS that is held, and by whom; fails if none is.
apt_lock_held() {
  python3 - "${APT_LOCKS[@]}" <<'PY'
import fcntl, os, sys

def holder(path):
    st = os.stat(path)
    file = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with open("/proc/locks") as locks:
        for line in locks:
            # "1: POSIX  ADVISORY  WRITE 1234 fe:00:131 0 EOF"; "1: -> ..." waits
            fields = line.split()
            if len(fields) > 5 and fields[1] != "->" and fields[5] == file:
                try:
                    with open(f"/proc/{fields[4]}/comm") as comm:
                        return f"{comm.read().strip()}, pid {fields[4]}"
                except OSError:
                    return f"pid {fields[4]}"
    return "another process"

for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        continue
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"{path} (held by {holder(path)})")
        sys.exit(0)
    finally:
        os.close(fd)
sys.exit(1)
PY
}

# apt_get ARG...: apt-get ARG..., once no other apt-get or dpkg holds apt's
# locks. Says once what it waits for; fails if they are still held after
# APT_LOCK_WAIT seconds, or with apt-get's status if it failed otherwise.
apt_get() {
  local deadline=$((SECONDS + APT_LOCK_WAIT)) held said="" status left
  while :; do
    while held="$(apt_lock_held)"; do
      if [[ -z $said ]]; then
        log "waiting up to ${APT_LOCK_WAIT}s for another apt-get or dpkg: $held"
        said=1
      fi
      if ((SECONDS >= deadline)); then
        log "still held after ${APT_LOCK_WAIT}s, giving up: $held"
        return 1
      fi
      sleep 1
    done
    left=$((deadline - SECONDS))
    ((left > 0)) || left=1
    apt-get -o DPkg::Lock::Timeout="$left" "$@" && return 0
    status=$?
    # Failed with a lock held: another took it between our look and
    # apt-get's own, so wait again; anything else is apt-get's to tell.
    if ! apt_lock_held >/dev/null || ((SECONDS >= deadline)); then
      return "$status"
    fi
  done
}
