# Sourced by the integration tests: a throwaway PostgreSQL 15 server in a
# temporary folder, run as the postgres user, on a free loopback port.
PG_BIN=/usr/lib/postgresql/15/bin
pg_as() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_setup() {  # pg_setup DIR -> sets PG_DIR, PG_PORT, PG_URL (database "frontier")
  PG_DIR="$1/pg"; mkdir -p "$PG_DIR"; chmod a+x "$1"
  [[ $(id -u) -eq 0 ]] && chown postgres "$PG_DIR"
  PG_PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U postgres -E UTF8 --no-sync > "$PG_DIR/initdb.log" 2>&1
  pg_start
  pg_as /usr/bin/psql -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c "CREATE DATABASE frontier" > /dev/null
  PG_URL="postgresql://postgres@127.0.0.1:$PG_PORT/frontier"
}
pg_start() {
  pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" start > /dev/null
}
pg_stop() { pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m "${1:-fast}" -w stop > /dev/null 2>&1 || true; }
pg_query() { /usr/bin/psql -At "$PG_URL" -c "$1"; }
