#!/bin/sh
# mcpdev as the client under test of the conformance suite's client scenarios
# (`conformance client --command tests/conformance/mcpdev_client.sh --scenario S`): the suite
# starts the scenario's server, then runs this with its URL last and the scenario in
# MCP_CONFORMANCE_SCENARIO. MCPDEV_BIN is the mcpdev binary under test.
for url; do :; done
case "$MCP_CONFORMANCE_SCENARIO" in
  tools_call) exec "$MCPDEV_BIN" call add_numbers a=2 b=3 --url "$url" --timeout 20s ;;
  sse-retry) exec "$MCPDEV_BIN" call test_reconnection --no-validate --url "$url" --timeout 20s ;;
  *) exec "$MCPDEV_BIN" tools list --url "$url" --timeout 20s ;;
esac
