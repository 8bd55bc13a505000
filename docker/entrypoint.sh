#!/bin/sh
# deerflow-ext container entrypoint: `docker run IMAGE [serve|run PROMPT|extensions ...]`.
#
# - With no config file at $DEERFLOW_CONFIG (nothing mounted, or the empty directory Docker
#   makes for a bind mount whose source is missing) the Gateway runs on built-in defaults
#   (embedded model, no extensions) instead of refusing to start: the image works as is.
# - Every startup check (variables, config, models, database, port) is deerflow-ext's own;
#   a refusal is one "error: ..." line and exit code 1, so an orchestrator's log says why.
# - Anything that is not a deerflow-ext command runs as given (`docker run IMAGE sh`).
set -eu

[ $# -eq 0 ] && set -- serve

if [ -n "${DEERFLOW_CONFIG:-}" ] && { [ ! -e "$DEERFLOW_CONFIG" ] || [ -d "$DEERFLOW_CONFIG" ]; }; then
    echo "deerflow-entrypoint: no config file at $DEERFLOW_CONFIG; running with built-in defaults" >&2
    unset DEERFLOW_CONFIG
    cd "${DEERFLOW_HOME:-/var/lib/deerflow}"
fi

case "$1" in
    serve | run | extensions | --version | --help | -h)
        exec deerflow-ext "$@"
        ;;
    *)
        exec "$@"
        ;;
esac
