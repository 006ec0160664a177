#!/usr/bin/env bash
# The live-query tests again, with query=thread (a server thread instead of
# signal-driven serving).
MT_QUERY_MODE=thread bash "$(dirname "$0")/test_query.sh" | sed -E 's/^(PASS|FAIL) /\1 [query=thread] /'
exit "${PIPESTATUS[0]}"
