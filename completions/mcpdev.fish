# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_mcpdev_global_optspecs
    string join \n json q/quiet v/verbose color= ca-file= ca-fingerprint= h/help V/version
end

function __fish_mcpdev_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_mcpdev_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_mcpdev_using_subcommand
    set -l cmd (__fish_mcpdev_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c mcpdev -n "__fish_mcpdev_needs_command" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_needs_command" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_needs_command" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_needs_command" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "serve" -d 'Run the hub: devices connect here; the CLI and MCP hosts reach them through it'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "dashboard" -d 'Print a fresh one-time log-in link to the hub\'s dashboard (and open it in a browser where one is available)'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "hello" -d 'Show a device\'s hello: identity, transport, features, audio parameters'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "init" -d 'Show the device\'s MCP `initialize` answer: protocol version, serverInfo, capabilities (through a hub: the answer to the hub\'s initialize at onboarding; --live sends a new one)'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "tools" -d 'List a device\'s tools'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "call" -d 'Call a tool: arguments typed and validated by its inputSchema before anything is sent'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "resources" -d 'An MCP server\'s resources: list, read, templates (--url or --stdio)'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "prompts" -d 'An MCP server\'s prompts: list, get with typed arguments (--url or --stdio)'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "tasks" -d 'The tasks an MCP server keeps (MCP 2025-11-25): list, get, result, cancel (--url or --stdio)'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "watch" -d 'Stream live events: connects, hellos, notifications, messages, and MCP traffic'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "devices" -d 'List connected devices; approve, revoke and list devices waiting to be admitted'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "sim" -d 'Run virtual devices (the firmware\'s own MCP core) against a backend'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "check" -d 'Check a device\'s firmware: conformance and robustness, each check pass/warn/fail'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "flash" -d 'Build the firmware, make the image, flash and provision an ESP32-C3/C6 (or save the image)'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "remote-token" -d 'Tokens for people who use this machine\'s hub from another machine (run it on the hub\'s machine)'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "man" -d 'Print the man page of mcpdev or of a command (`mcpdev man call | man -l -`)'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "completions" -d 'Print the shell completion script (`mcpdev completions bash > ~/.local/share/bash-completion/completions/mcpdev`)'
complete -c mcpdev -n "__fish_mcpdev_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l device-addr -d 'Where devices connect (WebSocket /xiaozhi/v1/)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l host-addr -d 'Where the CLI and MCP hosts connect; keep it on loopback unless you add --allowed-host' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l ready-file -d 'Once every listener is up, write the `listening` event (JSON: the real addresses) to FILE, so a script can wait for it; removed when the hub stops' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l demo -d 'Run N virtual devices in this process (2 when given without a number)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l demo-extra-tools -d 'Extra generated tools per demo device' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l demo-profile -d 'Which tools the demo devices offer' -r -f -a "stock-tools\t'The stock xiaozhi common and user-only tools, served the standard way'
conformance\t'The stock tools plus the MCP conformance suite\'s fixture tools'
stock\t'The stock tools with the stock firmware 2.4.2\'s deviations from MCP (see `sim::stock`): no answer to string ids, `Method not implemented` for `ping`, errors without a `code`, unescaped error messages, `nextCursor:""`, wrong types silently defaulted'"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l device-token -d 'Shared device tokens, comma-separated, accepted for any Device-Id (not bound to a device; prefer per-device admission)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l gateway-token -d 'Gateway credentials, comma-separated (the xiaozhi MQTT gateway sends one bearer token for every device): accepted in place of the device token of Device-Ids a person approved; the others wait in `mcpdev devices pending`' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l vision-url -d 'capabilities.vision.url for initialize (default: the hub\'s own vision endpoint)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l vision-token -d 'capabilities.vision.token for --vision-url (default: each device gets its own token for the hub\'s own endpoint)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l vision-dir -d 'Where the hub\'s vision endpoint saves uploaded photos, private to this user (folder 0700, files 0600) [default: vision/ in the state directory]' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l vision-max-files -d 'Photos the vision folder keeps (the oldest are removed first)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l vision-max-mb -d 'Megabytes the vision folder keeps (the oldest photos are removed first)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l keepalive -d 'Send an MCP ping to a device after this long without traffic (its limit is 120 s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l onboarding-timeout -d 'Timeout of each onboarding request (initialize, tools/list)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l allowed-host -d 'Also accept this Host name on the host listener (for LAN use); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l allowed-origin -d 'Also accept requests with this Origin on the host listener; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-token -d 'A bearer token MCP clients must send to /mcp, /devices/*/mcp and /sse (prefer the environment variable); shared by its holders, read once at start. Under --host-tls each person\'s remote token opens these too, and this one is optional' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-timeout -d 'How long an MCP tools/call waits for the device' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-names -d 'Tool names on /mcp: prefixed by device (`<alias>.<tool>`, stable) or the devices\' own' -r -f -a "prefixed\t'`<alias>.<tool>`: stable names, however many devices connect'
plain\t'The device\'s own names; a name already taken by another device gets the prefix'"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-page-size -d 'Tools per tools/list page on the MCP endpoints' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-fleet-threshold -d 'Devices connected above which /mcp and /sse offer fleet tools (search_devices, list_device_tools, call_device_tool) instead of every device\'s tools; they turn back at a quarter below. /devices/<id>/mcp always offers that device\'s own tools' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-max-sessions -d 'Open MCP sessions (/mcp, /sse, /devices/*/mcp and /sse) allowed in total; a new one beyond it takes the place of the least recently used Streamable HTTP session idle for --mcp-reclaim-idle, or is refused with 503 until sessions end or expire (5 min idle)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-max-sessions-per-peer -d 'Open MCP sessions allowed from one peer address (on loopback, every local MCP host is one peer), and for one person\'s remote token from any address' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-reclaim-idle -d 'How long a Streamable HTTP session must go without a request (and with none open) before a new session may take its place when a session cap is full' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-progress-after -d 'How long a tools/call with a progressToken waits for its device before the hub reports its stages (sent, waiting, the device\'s own progress, answered); a call answered sooner gets its answer alone. A device\'s own progress report starts them at once' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-max-tasks -d 'MCP tasks (a tools/call with params.task) the hub holds at once, running or finished; a task is kept for its ttl (at most 1 h), then forgotten' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-max-tasks-per-session -d 'MCP tasks one session may hold at once' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mqtt -d 'Serve MQTT devices: `embedded` runs a broker in this process; or a broker URL (mqtt://[user@]host[:port], mqtts://…; a password in MCPDEV_MQTT_PASSWORD)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mqtt-listen -d 'Where the embedded broker listens' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mqtt-group -d 'Shared-subscription group: hubs on one broker with the same group and the same hub secret share the devices (they read `$share/NAME-<tag>/…`, the tag derived from the hub secret, so a hub with another secret takes none of their uplinks)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l hub-name -d 'This hub\'s name in a cluster, shown by `devices` (column `hub`) instead of its id: up to 32 letters, digits, `.`, `-` and `_` (needs --mqtt: a hub without a broker has no cluster)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l cluster-index-max -d 'Cluster: devices this hub lists in its index for the other hubs at most (the first in Device-Id order); the others hubs find the rest on demand and say how many are not listed' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l cluster-stand-ins -d 'Cluster: other hubs\' devices kept as stand-ins for this hub\'s MCP endpoints at once; beyond it the one used least recently is dropped and made again when asked for' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l cluster-link -d 'Cluster: offer the other hubs a direct TLS link here for their requests to this hub\'s devices (one hop fewer than the broker each way): the address they reach this hub at, not a wildcard (port 0: any free port). Advertised to the hubs only, MAC\'d with the hub secret; a hub without one goes through the broker' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mqtt-max-payload -d 'Largest MQTT message to or from a device, in bytes; larger ones are refused' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mqtt-hooks -d 'EMQX 5: serve its HTTP authentication and authorization hooks here (/mqtt/authn, /mqtt/authz), so that EMQX asks the hub; the secret EMQX sends is in MCPDEV_MQTT_HOOK_SECRET(_FILE)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mqtt-device-endpoint -d '`mqtt.endpoint` handed to devices by OTA (default: the broker\'s address as devices reach it)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l udp-addr -d 'The UDP socket MQTT devices send audio to (counted, then dropped)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l public-host -d 'The name devices reach this machine by (OTA URLs, udp.server, vision URL); default: the hub\'s address the device came in on (MQTT devices: this machine\'s address)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l firmware -d 'Offer this firmware image in OTA answers (served by the hub; needs --firmware-version)' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l firmware-version -d 'The version of --firmware; a device upgrades when it is newer than its own' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l timezone-offset -d '`server_time.timezone_offset` in OTA answers, in minutes east of UTC' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l tls -d 'Serve devices over https:// and wss:// only (and mqtts with --mqtt embedded); `auto`: with the hub\'s own CA (docs/tls.md)' -r -f -a "off\t'Plain ws://, http:// and mqtt://'
auto\t'The hub\'s own CA and a certificate for this machine\'s names and addresses, kept (0600) in the state directory\'s tls/ and renewed before they expire'"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l tls-cert -d 'Serve TLS with this certificate chain (PEM, leaf first: certbot\'s fullchain.pem), re-read when it changes; a public certificate is what stock xiaozhi firmware accepts' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l tls-key -d 'The private key of --tls-cert (PEM)' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mqtts-listen -d 'With TLS and --mqtt embedded: where the broker takes MQTT over TLS (stock firmware uses TLS on port 8883 only)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l header-timeout -d 'A request\'s headers must arrive within this (both listeners)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l body-timeout -d 'A request\'s body must arrive within this (both listeners)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l tls-handshake-timeout -d 'A TLS handshake must be complete this long after its connection was let in (it holds a pre-hello slot meanwhile)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l hello-timeout -d 'A WebSocket device that has not said hello this long after connecting is closed' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l max-pre-hello-per-peer -d 'Connections from one address that have not said hello yet (more for a distant address whose hellos keep coming); more wait their turn (--accept-queue-timeout)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l max-pre-hello -d 'Device-side connections that have not said hello yet, in total; more wait their turn' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l accept-queue-timeout -d 'How long a connection over those caps waits for its turn before it is closed' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l max-queued-per-peer -d 'Connections from one address waiting for their turn; more are closed at once [default: half of the device-connection cap]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l max-device-connections -d 'Device-side connections in total (also kept 256 below the open-file limit, for the host listener)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l upstream -d 'Relay every device to this voice backend (wss://api.tenclass.net/xiaozhi/v1/, or a self-hosted xiaozhi-esp32-server): the hub opens it with the device\'s own headers and passes every frame both ways, while the CLI and MCP hosts still list and call the device\'s tools. Per-device upstreams: `[upstreams]` in mcpdev.toml' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l upstream-ota -d 'Pass OTA check-ins and /activate to this upstream OTA endpoint (https://api.tenclass.net/xiaozhi/ota/); its answer comes back with websocket.url pointing at this hub and any mqtt block replaced by websocket' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l approve-all -d 'Admit every device (a lab bench). By default a device is admitted once approved with `mcpdev devices approve`, and must present its own token'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mcp-user-tools -d 'Also offer tools the device marks user-only to MCP hosts'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mqtt-dynsec -d 'Mosquitto with dynamic security: keep a broker login per approved device (username and client id its key, password its token, its own two topics only); removed on revocation. Admin login in MCPDEV_MQTT_ADMIN_USERNAME and MCPDEV_MQTT_ADMIN_PASSWORD(_FILE), else the hub\'s own'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mqtt-shared-device-login -d 'Hand approved devices the one login in MCPDEV_MQTT_DEVICE_USERNAME/PASSWORD. It lets every device (and anyone who reads it off one) connect under any client id, another device\'s included: prefer --mqtt-dynsec or --mqtt-hooks'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l host-tls -d 'Serve the host listener (CLI, MCP hosts, dashboard) over https:// too, for use from other machines (with --host-addr or --allowed-host, and MCPDEV_MCP_TOKEN)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l mqtt-plain -d 'With TLS and --mqtt embedded: keep plain MQTT on --mqtt-listen too (by default it is moved to a loopback port for the hub\'s own link)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -l upstream-plain -d 'Allow plain ws:// and http:// upstreams (the device\'s token then crosses the network in clear text); by default only wss:// and https://, verified by the system\'s roots or MCPDEV_CA_FILE'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand serve" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand dashboard" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand dashboard" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand dashboard" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand dashboard" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand dashboard" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand dashboard" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand dashboard" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand dashboard" -l no-open -d 'Only print the link; do not open a browser'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand dashboard" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand dashboard" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -s d -l device -d 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l listen -d 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l mqtt -d 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l wait -d 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l timeout -d 'How long to wait for each answer from the device' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand hello" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -s d -l device -d 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l listen -d 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l mqtt -d 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l wait -d 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l timeout -d 'How long to wait for each answer from the device' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l vision-url -d 'Vision endpoint to give the device (`capabilities.vision.url`); sends a fresh initialize' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l vision-token -d 'Token for the vision endpoint (prefer the environment variable)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -l live -d 'Through a hub: send a new `initialize` instead of showing the onboarding answer (without --vision-url it carries no vision capability, so the device keeps the hub\'s endpoint)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand init" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and not __fish_seen_subcommand_from list help" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and not __fish_seen_subcommand_from list help" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and not __fish_seen_subcommand_from list help" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and not __fish_seen_subcommand_from list help" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and not __fish_seen_subcommand_from list help" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and not __fish_seen_subcommand_from list help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and not __fish_seen_subcommand_from list help" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and not __fish_seen_subcommand_from list help" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and not __fish_seen_subcommand_from list help" -f -a "list" -d 'Every tool, all pages, as a table (full schemas with --json)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and not __fish_seen_subcommand_from list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -s d -l device -d 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l listen -d 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l mqtt -d 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l wait -d 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l timeout -d 'How long to wait for each answer from the device' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l user-tools -d 'Also show user-only tools (annotated audience: ["user"])'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -l refresh -d 'List the tools on the device again instead of showing the hub\'s cached list (after a failed onboarding: onboard the device again)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from help" -f -a "list" -d 'Every tool, all pages, as a table (full schemas with --json)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tools; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l args-json -d 'Arguments as one JSON object (k=v words are merged on top)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l save-images -d 'Save image and audio content to DIR instead of summarising it' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l task-ttl -d 'With --task: how long the server should keep the task and its result (its `ttl`)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -s d -l device -d 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l listen -d 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l mqtt -d 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l wait -d 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l timeout -d 'How long to wait for each answer from the device' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l no-validate -d 'Send even if the arguments fail the inputSchema (the device decides)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -l task -d 'With --url or --stdio: run the call as a task (MCP 2025-11-25): its status is shown on stderr while it runs, its result fetched when it ends, and Ctrl-C cancels it (`tasks/cancel`). --timeout bounds the whole wait; a task still running then is left to run (`mcpdev tasks result ID` fetches it later). A tool whose taskSupport is "required" runs as a task without it'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand call" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -f -a "list" -d 'Every resource, all pages, as a table (as the server sent them with --json)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -f -a "read" -d 'Read one resource by URI: text printed (escaped for the terminal), binary saved with --out'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -f -a "templates" -d 'Every resource template (URIs with {placeholders})'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and not __fish_seen_subcommand_from list read templates help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -l timeout -d 'How long to wait for each answer from the server' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -l out -d 'Write the contents (text as UTF-8, blobs decoded) to FILE instead of the terminal' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -l timeout -d 'How long to wait for each answer from the server' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from read" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -l timeout -d 'How long to wait for each answer from the server' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from templates" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from help" -f -a "list" -d 'Every resource, all pages, as a table (as the server sent them with --json)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from help" -f -a "read" -d 'Read one resource by URI: text printed (escaped for the terminal), binary saved with --out'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from help" -f -a "templates" -d 'Every resource template (URIs with {placeholders})'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand resources; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -f -a "list" -d 'Every prompt, all pages, with its arguments'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -f -a "get" -d 'Get a prompt\'s messages: arguments given as name=value, checked against the prompt\'s declared arguments before anything is sent'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and not __fish_seen_subcommand_from list get help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -l timeout -d 'How long to wait for each answer from the server' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -l args-json -d 'Arguments as one JSON object of strings (name=value words are merged on top)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -l timeout -d 'How long to wait for each answer from the server' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from get" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from help" -f -a "list" -d 'Every prompt, all pages, with its arguments'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from help" -f -a "get" -d 'Get a prompt\'s messages: arguments given as name=value, checked against the prompt\'s declared arguments before anything is sent'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand prompts; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -f -a "list" -d 'The tasks the server keeps for this session (all pages)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -f -a "get" -d 'One task\'s status'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -f -a "result" -d 'A task\'s result: waits (up to --timeout) for it to finish, then shows it as `call` does'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -f -a "cancel" -d 'Cancel a task'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and not __fish_seen_subcommand_from list get result cancel help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -l timeout -d 'How long to wait for each answer from the server' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -l timeout -d 'How long to wait for each answer from the server' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from get" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -l timeout -d 'How long to wait for each answer from the server' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from result" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -l url -d 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -l stdio -d 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml\'s [stdio]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -l stdio-env -d 'With --stdio: NAME=VALUE in the server\'s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -s H -l header -d 'With --url: an HTTP header `Name: value` for every request; repeatable' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -l transport -d 'With --url: the transport (auto picks SSE for URLs ending in /sse)' -r -f -a "auto\t'SSE when the URL path ends in `/sse`, else Streamable HTTP'
http\t''
sse\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -l timeout -d 'How long to wait for each answer from the server' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from cancel" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from help" -f -a "list" -d 'The tasks the server keeps for this session (all pages)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from help" -f -a "get" -d 'One task\'s status'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from help" -f -a "result" -d 'A task\'s result: waits (up to --timeout) for it to finish, then shows it as `call` does'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from help" -f -a "cancel" -d 'Cancel a task'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand tasks; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -s d -l device -d 'Only this device (id, prefix or alias); all devices when left out' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -l count -d 'Stop after this many events' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -l record -d 'Also write the device\'s session to FILE (NDJSON: identity and hello, then every MCP frame both ways with timestamps; never a token), for `sim --replay FILE`; needs --device' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -l traffic -d 'Also show every MCP frame in both directions, with the round-trip latency of replies'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand watch" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -l page-size -d 'Devices per request to the hub when listing (at most 1000)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -l ndjson -d 'The listing as NDJSON: one device object per line, written as the hub\'s pages arrive (--json keeps one array)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -f -a "approve" -d 'Admit a device: the 6-digit code it shows (or that its refusal named); or its Device-Id, which prints a token for you to give the device (never handed out over OTA)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -f -a "deny" -d 'Refuse a pending request by its code (the device may ask again, with a new code)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -f -a "revoke" -d 'Withdraw a device\'s admission and disconnect it'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -f -a "pending" -d 'Devices waiting to be admitted, with their codes'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -f -a "admitted" -d 'Devices that are admitted'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and not __fish_seen_subcommand_from approve deny revoke pending admitted help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from approve" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from approve" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from approve" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from approve" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from approve" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from approve" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from approve" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from approve" -l rebind -d 'Replace the binding of a device that is admitted already (a new board or a reset one with the same MAC): the old binding\'s tokens stop working and its session is cut off'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from approve" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from approve" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from deny" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from deny" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from deny" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from deny" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from deny" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from deny" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from deny" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from deny" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from deny" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from revoke" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from revoke" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from revoke" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from revoke" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from revoke" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from revoke" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from revoke" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from revoke" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from revoke" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from pending" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from pending" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from pending" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from pending" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from pending" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from pending" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from pending" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from pending" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from pending" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from admitted" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from admitted" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from admitted" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from admitted" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from admitted" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from admitted" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from admitted" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from admitted" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from admitted" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from help" -f -a "approve" -d 'Admit a device: the 6-digit code it shows (or that its refusal named); or its Device-Id, which prints a token for you to give the device (never handed out over OTA)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from help" -f -a "deny" -d 'Refuse a pending request by its code (the device may ask again, with a new code)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from help" -f -a "revoke" -d 'Withdraw a device\'s admission and disconnect it'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from help" -f -a "pending" -d 'Devices waiting to be admitted, with their codes'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from help" -f -a "admitted" -d 'Devices that are admitted'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand devices; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l url -d 'The backend\'s WebSocket URL [default: ws://127.0.0.1:PORT/xiaozhi/v1/, PORT from MCPDEV_DEVICE_ADDR as `serve` reads it, else 8000]' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l device-id -d 'Device-Id (MAC) of the first device; further devices count up from it [default: 02:00:00:00:00:01, or the next free one: another `sim` here, or a device the hub has (`serve --demo`\'s), moves it on; the id taken is printed]. With --replay: replay under this id (with a Client-Id of its own), beside the recorded device, instead of as it' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l count -d 'How many virtual devices to run in this process (one the backend refuses ends alone, reported; the others run on)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l token -d 'Device token, sent as `Authorization: Bearer <token>` (prefer the environment variable)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l extra-tools -d 'Extra generated tools per device, to exercise paging' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l protocol-version -d 'Binary protocol version announced in `Protocol-Version` and the hello' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l profile -d 'Which tools the virtual devices offer' -r -f -a "stock-tools\t'The stock xiaozhi common and user-only tools, served the standard way'
conformance\t'The stock tools plus the MCP conformance suite\'s fixture tools'
stock\t'The stock tools with the stock firmware 2.4.2\'s deviations from MCP (see `sim::stock`): no answer to string ids, `Method not implemented` for `ping`, errors without a `code`, unescaped error messages, `nextCursor:""`, wrong types silently defaulted'"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l source-addr -d 'Connect from these local addresses, the devices spread over them in turn (e.g. 127.0.0.2,127.0.0.3): one source address reaches a hub through about 28,000 ports at most' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l mqtt -d 'Connect over MQTT through this broker instead of WebSocket (mqtt://host:1883)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l ota -d 'Bootstrap like a stock device: POST the system info to this OTA URL, then connect over what the answer says (MQTT if it has an mqtt section, else WebSocket)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l replay -d 'Play back a session recorded with `watch --record FILE`: one device with the recorded identity and hello, answering each request with the recorded reply (--count, --extra-tools, --profile, --protocol-version, --mqtt, --ota and --source-addr do not apply to it and are refused)' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -l replay-timing -d 'With --replay: answer after the recorded latencies'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand sim" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l listen -d 'Listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, check it, exit (every check); without it or --mqtt, the device is reached through the hub (checks needing raw frames are skipped)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l mqtt -d 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883, and run every check but the hello checks (an idle device says no hello over MQTT)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -s d -l device -d 'The Device-Id (MAC); through a hub also a unique prefix of it, or an alias' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l hub -d 'The hub\'s host listener' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l wait -d 'Wait up to DURATION for the device to connect (and, through a hub, finish onboarding; over MQTT, answer initialize: at least --timeout); default: 1h with --listen, not at all through a hub' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l timeout -d 'How long to wait for each answer from the device' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l call -d 'Call the tools matching GLOB (`*`, `?`) with arguments from their schemas; repeatable. User-only and reboot/reset/upgrade/erase tools are called only when named exactly' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l fuzz -d 'Also send N generated argument sets to each tool chosen with --call (bounds and just outside, wrong types, missing arguments, long and non-ASCII strings)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l max-onboarding -d 'Onboarding (initialize and every tools/list page) must end within DURATION of the hello' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l junit -d 'Also write the results as JUnit XML to FILE' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -l strict -d 'Treat warnings as failures'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand check" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -s c -l chip -d 'The chip to build for (the connected chip is checked against it)' -r -f -a "esp32c3\t''
esp32c6\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -s p -l port -d 'Serial port of the board (default: the one USB-serial port that looks like an ESP board)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -s B -l baud -d 'Baud rate for flashing (connecting always starts at 115200)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l save-image -d 'Write the image to FILE instead of flashing (no hardware needed)' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l image -d 'Flash this prebuilt merged image at 0x0 instead of building (e.g. the stock xiaozhi firmware)' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l flash-args -d 'Flash a prebuilt ESP-IDF build from its `build/flash_args` (offsets and files)' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l wifi-ssid -d 'Wi-Fi network the device joins' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l hub-url -d 'Hub URL: ws://HOST:PORT/xiaozhi/v1/, mqtt://BROKER[:PORT] or http://HOST:PORT/xiaozhi/ota/, or their TLS forms wss://, mqtts://, https:// with a hub CA (default: ws://<LAN address>:8000/xiaozhi/v1/, wss:// with a hub CA)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l hub-ca -d 'The hub\'s CA certificate (PEM or DER) for the record: the device then talks to its hub only over TLS (wss://, https://, mqtts://), verified against it [default: the CA of `mcpdev serve --tls auto` on this machine, <state dir>/tls/ca.pem, when it exists]' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l wait-device -d 'After flashing, wait up to DURATION (60s without a value) for the device to connect to the hub and print its hello' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l monitor-baud -d 'Baud rate of the serial log for --monitor' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l hub -d 'The hub\'s host listener, for --wait-device' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l firmware-dir -d 'The firmware workspace to build (default: the `firmware/` next to mcpdev\'s sources)' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l no-verify -d 'Do not read the flash back to verify what was written'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l merge -d 'With --save-image: one file for offset 0 (bootloader, partition table, provisioning record, app) instead of the app alone'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l no-hub-ca -d 'Provision no hub CA even when this machine\'s hub has one: the link stays plain text'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l no-provision -d 'Do not write the provisioning record (keep the one on the device; app-only images never have one)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -s M -l monitor -d 'After flashing, show the device\'s serial log until Ctrl-C (reopening the port when a USB-Serial-JTAG board comes back after its reset); NDJSON lines with --json'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l monitor-only -d 'Only show the serial log of the board (no build, no flashing) until Ctrl-C'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l board-info -d 'Only tell what board is on the port (chip, revision, crystal, flash size, features, MAC)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -l erase -d 'Erase the whole flash before writing (the provisioning record and any old data go too)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand flash" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -f -a "create" -d 'Make a token for NAME and print it (once: only its hash is kept, in the state directory), with the hub\'s CA on a second line when the hub has one: the CLI then sends the token only to a hub that proves that CA'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -f -a "list" -d 'The tokens this hub accepts: names, ids and when they were made (never a secret)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -f -a "revoke" -d 'Withdraw NAME\'s token: the hub refuses it from now on and ends, within a second, every stream, session, connection and task it opened'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and not __fish_seen_subcommand_from create list revoke help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from create" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from create" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from create" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from create" -l out -d 'Write the token to FILE, readable by you only (0600), instead of printing it' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from create" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from create" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from create" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from create" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from list" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from list" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from list" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from list" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from revoke" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from revoke" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from revoke" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from revoke" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from revoke" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from revoke" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from revoke" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from revoke" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from help" -f -a "create" -d 'Make a token for NAME and print it (once: only its hash is kept, in the state directory), with the hub\'s CA on a second line when the hub has one: the CLI then sends the token only to a hub that proves that CA'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from help" -f -a "list" -d 'The tokens this hub accepts: names, ids and when they were made (never a secret)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from help" -f -a "revoke" -d 'Withdraw NAME\'s token: the hub refuses it from now on and ends, within a second, every stream, session, connection and task it opened'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand remote-token; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand man" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand man" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand man" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand man" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand man" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand man" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand man" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand man" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand completions" -l color -d 'When to use colour (NO_COLOR is honoured under auto)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpdev -n "__fish_mcpdev_using_subcommand completions" -l ca-file -d 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system\'s roots; `serve` prints where the hub keeps its own' -r -F
complete -c mcpdev -n "__fish_mcpdev_using_subcommand completions" -l ca-fingerprint -d 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA\'s)' -r
complete -c mcpdev -n "__fish_mcpdev_using_subcommand completions" -l json -d 'Machine-readable output: one JSON document, or NDJSON for streams'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand completions" -s q -l quiet -d 'Print only results (no progress or hints)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand completions" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand completions" -s h -l help -d 'Print help'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand completions" -s V -l version -d 'Print version'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "serve" -d 'Run the hub: devices connect here; the CLI and MCP hosts reach them through it'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "dashboard" -d 'Print a fresh one-time log-in link to the hub\'s dashboard (and open it in a browser where one is available)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "hello" -d 'Show a device\'s hello: identity, transport, features, audio parameters'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "init" -d 'Show the device\'s MCP `initialize` answer: protocol version, serverInfo, capabilities (through a hub: the answer to the hub\'s initialize at onboarding; --live sends a new one)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "tools" -d 'List a device\'s tools'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "call" -d 'Call a tool: arguments typed and validated by its inputSchema before anything is sent'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "resources" -d 'An MCP server\'s resources: list, read, templates (--url or --stdio)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "prompts" -d 'An MCP server\'s prompts: list, get with typed arguments (--url or --stdio)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "tasks" -d 'The tasks an MCP server keeps (MCP 2025-11-25): list, get, result, cancel (--url or --stdio)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "watch" -d 'Stream live events: connects, hellos, notifications, messages, and MCP traffic'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "devices" -d 'List connected devices; approve, revoke and list devices waiting to be admitted'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "sim" -d 'Run virtual devices (the firmware\'s own MCP core) against a backend'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "check" -d 'Check a device\'s firmware: conformance and robustness, each check pass/warn/fail'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "flash" -d 'Build the firmware, make the image, flash and provision an ESP32-C3/C6 (or save the image)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "remote-token" -d 'Tokens for people who use this machine\'s hub from another machine (run it on the hub\'s machine)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "man" -d 'Print the man page of mcpdev or of a command (`mcpdev man call | man -l -`)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "completions" -d 'Print the shell completion script (`mcpdev completions bash > ~/.local/share/bash-completion/completions/mcpdev`)'
complete -c mcpdev -n "__fish_mcpdev_using_subcommand help; and not __fish_seen_subcommand_from serve dashboard hello init tools call resources prompts tasks watch devices sim check flash remote-token man completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
