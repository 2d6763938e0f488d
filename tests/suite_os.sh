#!/usr/bin/env bash
# suite_os.sh -- the platform layer (tests/test_os.c, builds in tests/os.mk):
#   os.lowmap / os.lowmap_debug
#       hakmem compiled in with a 1 TiB region map: nothing beyond the map is
#       handed out or written to the map
source "$(dirname "$0")/lib.sh"
BIN=$T/test_os
LOW=$T/os/test_os_lowmap
LOWD=$T/os/test_os_lowmap_debug

if need os.lowmap "$LOW"; then
    run_bin os.lowmap 120 "$LOW" -p os.lowmap --lowmap
fi
if need os.lowmap_debug "$LOWD"; then
    run_bin os.lowmap_debug 300 "$LOWD" -p os.lowmap_debug --lowmap
fi

exit $SUITE_STATUS
