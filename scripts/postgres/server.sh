#!/usr/bin/env bash
# A throwaway PostgreSQL server for certifying PostgreSQL's ADBC driver:
# Debian's server packages (installed when missing), a cluster in a fresh
# scratch directory, listening only on a Unix socket in that directory.
#
#   eval "$(scripts/postgres/server.sh start)"   # sets ARROWCERT_PG_DIR and ARROWCERT_PG_URI
#   scripts/postgres/server.sh stop "$ARROWCERT_PG_DIR"
#   scripts/postgres/server.sh install            # the packages only (CI)
#
# Nothing outside the scratch directory is touched (no system cluster, no
# TCP port); stop kills the server and removes the directory. As root, the
# server runs as the `postgres` user the package creates (initdb refuses
# root).
set -euo pipefail
cmd=${1:?usage: server.sh install | start | stop DIR}
bindir() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [ -n "$d" ] && [ -x "$d/postgres" ] && echo "$d"
}
as_server() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
install_server() {
    if ! bindir >/dev/null; then
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO="sudo -n"
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get update -qq >&2 && $SUDO apt-get install -y -qq --no-install-recommends postgresql >&2
        # The package may start the system's own cluster: not ours to keep.
        $SUDO pg_ctlcluster --force "$(ls /etc/postgresql)" main stop >/dev/null 2>&1 || true
    fi
    bindir >/dev/null
}
case "$cmd" in
install)
    install_server
    ;;
start)
    install_server || true
    BIN=$(bindir) || { echo "server.sh: no PostgreSQL server binaries" >&2; exit 1; }
    # Short: a Unix socket path is limited to about 100 bytes.
    DIR=$(mktemp -d /tmp/arrowcert-pg-XXXXXX)
    chmod 755 "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres "$DIR"
    as_server "$BIN/initdb" -D "$DIR/data" -U arrowcert --auth=trust -E UTF8 --no-instructions >"$DIR/initdb.log" 2>&1 \
        || { cat "$DIR/initdb.log" >&2; rm -rf "$DIR"; exit 1; }
    as_server "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -o "-k $DIR -c listen_addresses='' -p 5432" start >/dev/null \
        || { cat "$DIR/server.log" >&2; rm -rf "$DIR"; exit 1; }
    echo "export ARROWCERT_PG_DIR=$DIR"
    echo "export ARROWCERT_PG_URI='postgresql:///postgres?host=$DIR&port=5432&user=arrowcert'"
    ;;
stop)
    DIR=${2:?usage: server.sh stop DIR}
    case "$DIR" in /tmp/arrowcert-pg-*) ;; *) echo "server.sh: $DIR is not a scratch directory of this script" >&2; exit 2 ;; esac
    BIN=$(bindir) || true
    if [ -n "${BIN:-}" ] && [ -d "$DIR/data" ]; then
        as_server "$BIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null 2>&1 || true
    fi
    # Anything of the cluster still running (a crashed pg_ctl): its postmaster.
    if [ -f "$DIR/data/postmaster.pid" ]; then
        kill -9 "$(head -1 "$DIR/data/postmaster.pid")" 2>/dev/null || true
    fi
    rm -rf "$DIR"
    ;;
*) echo "usage: server.sh start | stop DIR" >&2; exit 2 ;;
esac
