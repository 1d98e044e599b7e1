# Sourced by the benchmarks after tests/integration/pg.sh: pg_start starts the
# throwaway PostgreSQL with the durability PG_DURABILITY names:
#   fast    fsync=off, as the integration tests run it (a crash of the
#           machine may lose committed transactions);
#   durable fsync=on, synchronous_commit=on: PostgreSQL's defaults, what a
#           cluster store runs with (a commit is on disk when it returns).
PG_DURABILITY="${PG_DURABILITY:-fast}"
pg_start() {
  local fsync=off
  [[ $PG_DURABILITY == durable ]] && fsync=on
  pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=$fsync -c synchronous_commit=on -c max_connections=300 ${PG_OPTIONS:-}" \
    start > /dev/null
}
# pg_durability MODE: restarts the server with MODE (fast or durable).
pg_durability() { PG_DURABILITY="$1"; pg_stop fast; pg_start; }
