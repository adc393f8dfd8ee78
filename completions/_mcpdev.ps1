
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'mcpdev' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'mcpdev'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'mcpdev' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Run the hub: devices connect here; the CLI and MCP hosts reach them through it')
            [CompletionResult]::new('dashboard', 'dashboard', [CompletionResultType]::ParameterValue, 'Print a fresh one-time log-in link to the hub''s dashboard (and open it in a browser where one is available)')
            [CompletionResult]::new('hello', 'hello', [CompletionResultType]::ParameterValue, 'Show a device''s hello: identity, transport, features, audio parameters')
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Show the device''s MCP `initialize` answer: protocol version, serverInfo, capabilities (through a hub: the answer to the hub''s initialize at onboarding; --live sends a new one)')
            [CompletionResult]::new('tools', 'tools', [CompletionResultType]::ParameterValue, 'List a device''s tools')
            [CompletionResult]::new('call', 'call', [CompletionResultType]::ParameterValue, 'Call a tool: arguments typed and validated by its inputSchema before anything is sent')
            [CompletionResult]::new('resources', 'resources', [CompletionResultType]::ParameterValue, 'An MCP server''s resources: list, read, templates (--url or --stdio)')
            [CompletionResult]::new('prompts', 'prompts', [CompletionResultType]::ParameterValue, 'An MCP server''s prompts: list, get with typed arguments (--url or --stdio)')
            [CompletionResult]::new('tasks', 'tasks', [CompletionResultType]::ParameterValue, 'The tasks an MCP server keeps (MCP 2025-11-25): list, get, result, cancel (--url or --stdio)')
            [CompletionResult]::new('watch', 'watch', [CompletionResultType]::ParameterValue, 'Stream live events: connects, hellos, notifications, messages, and MCP traffic')
            [CompletionResult]::new('devices', 'devices', [CompletionResultType]::ParameterValue, 'List connected devices; approve, revoke and list devices waiting to be admitted')
            [CompletionResult]::new('sim', 'sim', [CompletionResultType]::ParameterValue, 'Run virtual devices (the firmware''s own MCP core) against a backend')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Check a device''s firmware: conformance and robustness, each check pass/warn/fail')
            [CompletionResult]::new('flash', 'flash', [CompletionResultType]::ParameterValue, 'Build the firmware, make the image, flash and provision an ESP32-C3/C6 (or save the image)')
            [CompletionResult]::new('remote-token', 'remote-token', [CompletionResultType]::ParameterValue, 'Tokens for people who use this machine''s hub from another machine (run it on the hub''s machine)')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page of mcpdev or of a command (`mcpdev man call | man -l -`)')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print the shell completion script (`mcpdev completions bash > ~/.local/share/bash-completion/completions/mcpdev`)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;serve' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--device-addr', '--device-addr', [CompletionResultType]::ParameterName, 'Where devices connect (WebSocket /xiaozhi/v1/)')
            [CompletionResult]::new('--host-addr', '--host-addr', [CompletionResultType]::ParameterName, 'Where the CLI and MCP hosts connect; keep it on loopback unless you add --allowed-host')
            [CompletionResult]::new('--ready-file', '--ready-file', [CompletionResultType]::ParameterName, 'Once every listener is up, write the `listening` event (JSON: the real addresses) to FILE, so a script can wait for it; removed when the hub stops')
            [CompletionResult]::new('--demo', '--demo', [CompletionResultType]::ParameterName, 'Run N virtual devices in this process (2 when given without a number)')
            [CompletionResult]::new('--demo-extra-tools', '--demo-extra-tools', [CompletionResultType]::ParameterName, 'Extra generated tools per demo device')
            [CompletionResult]::new('--demo-profile', '--demo-profile', [CompletionResultType]::ParameterName, 'Which tools the demo devices offer')
            [CompletionResult]::new('--device-token', '--device-token', [CompletionResultType]::ParameterName, 'Shared device tokens, comma-separated, accepted for any Device-Id (not bound to a device; prefer per-device admission)')
            [CompletionResult]::new('--gateway-token', '--gateway-token', [CompletionResultType]::ParameterName, 'Gateway credentials, comma-separated (the xiaozhi MQTT gateway sends one bearer token for every device): accepted in place of the device token of Device-Ids a person approved; the others wait in `mcpdev devices pending`')
            [CompletionResult]::new('--vision-url', '--vision-url', [CompletionResultType]::ParameterName, 'capabilities.vision.url for initialize (default: the hub''s own vision endpoint)')
            [CompletionResult]::new('--vision-token', '--vision-token', [CompletionResultType]::ParameterName, 'capabilities.vision.token for --vision-url (default: each device gets its own token for the hub''s own endpoint)')
            [CompletionResult]::new('--vision-dir', '--vision-dir', [CompletionResultType]::ParameterName, 'Where the hub''s vision endpoint saves uploaded photos, private to this user (folder 0700, files 0600) [default: vision/ in the state directory]')
            [CompletionResult]::new('--vision-max-files', '--vision-max-files', [CompletionResultType]::ParameterName, 'Photos the vision folder keeps (the oldest are removed first)')
            [CompletionResult]::new('--vision-max-mb', '--vision-max-mb', [CompletionResultType]::ParameterName, 'Megabytes the vision folder keeps (the oldest photos are removed first)')
            [CompletionResult]::new('--keepalive', '--keepalive', [CompletionResultType]::ParameterName, 'Send an MCP ping to a device after this long without traffic (its limit is 120 s)')
            [CompletionResult]::new('--onboarding-timeout', '--onboarding-timeout', [CompletionResultType]::ParameterName, 'Timeout of each onboarding request (initialize, tools/list)')
            [CompletionResult]::new('--allowed-host', '--allowed-host', [CompletionResultType]::ParameterName, 'Also accept this Host name on the host listener (for LAN use); repeatable')
            [CompletionResult]::new('--allowed-origin', '--allowed-origin', [CompletionResultType]::ParameterName, 'Also accept requests with this Origin on the host listener; repeatable')
            [CompletionResult]::new('--mcp-token', '--mcp-token', [CompletionResultType]::ParameterName, 'A bearer token MCP clients must send to /mcp, /devices/*/mcp and /sse (prefer the environment variable); shared by its holders, read once at start. Under --host-tls each person''s remote token opens these too, and this one is optional')
            [CompletionResult]::new('--mcp-timeout', '--mcp-timeout', [CompletionResultType]::ParameterName, 'How long an MCP tools/call waits for the device')
            [CompletionResult]::new('--mcp-names', '--mcp-names', [CompletionResultType]::ParameterName, 'Tool names on /mcp: prefixed by device (`<alias>.<tool>`, stable) or the devices'' own')
            [CompletionResult]::new('--mcp-page-size', '--mcp-page-size', [CompletionResultType]::ParameterName, 'Tools per tools/list page on the MCP endpoints')
            [CompletionResult]::new('--mcp-fleet-threshold', '--mcp-fleet-threshold', [CompletionResultType]::ParameterName, 'Devices connected above which /mcp and /sse offer fleet tools (search_devices, list_device_tools, call_device_tool) instead of every device''s tools; they turn back at a quarter below. /devices/<id>/mcp always offers that device''s own tools')
            [CompletionResult]::new('--mcp-max-sessions', '--mcp-max-sessions', [CompletionResultType]::ParameterName, 'Open MCP sessions (/mcp, /sse, /devices/*/mcp and /sse) allowed in total; a new one beyond it takes the place of the least recently used Streamable HTTP session idle for --mcp-reclaim-idle, or is refused with 503 until sessions end or expire (5 min idle)')
            [CompletionResult]::new('--mcp-max-sessions-per-peer', '--mcp-max-sessions-per-peer', [CompletionResultType]::ParameterName, 'Open MCP sessions allowed from one peer address (on loopback, every local MCP host is one peer), and for one person''s remote token from any address')
            [CompletionResult]::new('--mcp-reclaim-idle', '--mcp-reclaim-idle', [CompletionResultType]::ParameterName, 'How long a Streamable HTTP session must go without a request (and with none open) before a new session may take its place when a session cap is full')
            [CompletionResult]::new('--mcp-progress-after', '--mcp-progress-after', [CompletionResultType]::ParameterName, 'How long a tools/call with a progressToken waits for its device before the hub reports its stages (sent, waiting, the device''s own progress, answered); a call answered sooner gets its answer alone. A device''s own progress report starts them at once')
            [CompletionResult]::new('--mcp-max-tasks', '--mcp-max-tasks', [CompletionResultType]::ParameterName, 'MCP tasks (a tools/call with params.task) the hub holds at once, running or finished; a task is kept for its ttl (at most 1 h), then forgotten')
            [CompletionResult]::new('--mcp-max-tasks-per-session', '--mcp-max-tasks-per-session', [CompletionResultType]::ParameterName, 'MCP tasks one session may hold at once')
            [CompletionResult]::new('--mqtt', '--mqtt', [CompletionResultType]::ParameterName, 'Serve MQTT devices: `embedded` runs a broker in this process; or a broker URL (mqtt://[user@]host[:port], mqtts://…; a password in MCPDEV_MQTT_PASSWORD)')
            [CompletionResult]::new('--mqtt-listen', '--mqtt-listen', [CompletionResultType]::ParameterName, 'Where the embedded broker listens')
            [CompletionResult]::new('--mqtt-group', '--mqtt-group', [CompletionResultType]::ParameterName, 'Shared-subscription group: hubs on one broker with the same group and the same hub secret share the devices (they read `$share/NAME-<tag>/…`, the tag derived from the hub secret, so a hub with another secret takes none of their uplinks)')
            [CompletionResult]::new('--hub-name', '--hub-name', [CompletionResultType]::ParameterName, 'This hub''s name in a cluster, shown by `devices` (column `hub`) instead of its id: up to 32 letters, digits, `.`, `-` and `_` (needs --mqtt: a hub without a broker has no cluster)')
            [CompletionResult]::new('--cluster-index-max', '--cluster-index-max', [CompletionResultType]::ParameterName, 'Cluster: devices this hub lists in its index for the other hubs at most (the first in Device-Id order); the others hubs find the rest on demand and say how many are not listed')
            [CompletionResult]::new('--cluster-stand-ins', '--cluster-stand-ins', [CompletionResultType]::ParameterName, 'Cluster: other hubs'' devices kept as stand-ins for this hub''s MCP endpoints at once; beyond it the one used least recently is dropped and made again when asked for')
            [CompletionResult]::new('--cluster-link', '--cluster-link', [CompletionResultType]::ParameterName, 'Cluster: offer the other hubs a direct TLS link here for their requests to this hub''s devices (one hop fewer than the broker each way): the address they reach this hub at, not a wildcard (port 0: any free port). Advertised to the hubs only, MAC''d with the hub secret; a hub without one goes through the broker')
            [CompletionResult]::new('--mqtt-max-payload', '--mqtt-max-payload', [CompletionResultType]::ParameterName, 'Largest MQTT message to or from a device, in bytes; larger ones are refused')
            [CompletionResult]::new('--mqtt-hooks', '--mqtt-hooks', [CompletionResultType]::ParameterName, 'EMQX 5: serve its HTTP authentication and authorization hooks here (/mqtt/authn, /mqtt/authz), so that EMQX asks the hub; the secret EMQX sends is in MCPDEV_MQTT_HOOK_SECRET(_FILE)')
            [CompletionResult]::new('--mqtt-device-endpoint', '--mqtt-device-endpoint', [CompletionResultType]::ParameterName, '`mqtt.endpoint` handed to devices by OTA (default: the broker''s address as devices reach it)')
            [CompletionResult]::new('--udp-addr', '--udp-addr', [CompletionResultType]::ParameterName, 'The UDP socket MQTT devices send audio to (counted, then dropped)')
            [CompletionResult]::new('--public-host', '--public-host', [CompletionResultType]::ParameterName, 'The name devices reach this machine by (OTA URLs, udp.server, vision URL); default: the hub''s address the device came in on (MQTT devices: this machine''s address)')
            [CompletionResult]::new('--firmware', '--firmware', [CompletionResultType]::ParameterName, 'Offer this firmware image in OTA answers (served by the hub; needs --firmware-version)')
            [CompletionResult]::new('--firmware-version', '--firmware-version', [CompletionResultType]::ParameterName, 'The version of --firmware; a device upgrades when it is newer than its own')
            [CompletionResult]::new('--timezone-offset', '--timezone-offset', [CompletionResultType]::ParameterName, '`server_time.timezone_offset` in OTA answers, in minutes east of UTC')
            [CompletionResult]::new('--tls', '--tls', [CompletionResultType]::ParameterName, 'Serve devices over https:// and wss:// only (and mqtts with --mqtt embedded); `auto`: with the hub''s own CA (docs/tls.md)')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Serve TLS with this certificate chain (PEM, leaf first: certbot''s fullchain.pem), re-read when it changes; a public certificate is what stock xiaozhi firmware accepts')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'The private key of --tls-cert (PEM)')
            [CompletionResult]::new('--mqtts-listen', '--mqtts-listen', [CompletionResultType]::ParameterName, 'With TLS and --mqtt embedded: where the broker takes MQTT over TLS (stock firmware uses TLS on port 8883 only)')
            [CompletionResult]::new('--header-timeout', '--header-timeout', [CompletionResultType]::ParameterName, 'A request''s headers must arrive within this (both listeners)')
            [CompletionResult]::new('--body-timeout', '--body-timeout', [CompletionResultType]::ParameterName, 'A request''s body must arrive within this (both listeners)')
            [CompletionResult]::new('--tls-handshake-timeout', '--tls-handshake-timeout', [CompletionResultType]::ParameterName, 'A TLS handshake must be complete this long after its connection was let in (it holds a pre-hello slot meanwhile)')
            [CompletionResult]::new('--hello-timeout', '--hello-timeout', [CompletionResultType]::ParameterName, 'A WebSocket device that has not said hello this long after connecting is closed')
            [CompletionResult]::new('--max-pre-hello-per-peer', '--max-pre-hello-per-peer', [CompletionResultType]::ParameterName, 'Connections from one address that have not said hello yet (more for a distant address whose hellos keep coming); more wait their turn (--accept-queue-timeout)')
            [CompletionResult]::new('--max-pre-hello', '--max-pre-hello', [CompletionResultType]::ParameterName, 'Device-side connections that have not said hello yet, in total; more wait their turn')
            [CompletionResult]::new('--accept-queue-timeout', '--accept-queue-timeout', [CompletionResultType]::ParameterName, 'How long a connection over those caps waits for its turn before it is closed')
            [CompletionResult]::new('--max-queued-per-peer', '--max-queued-per-peer', [CompletionResultType]::ParameterName, 'Connections from one address waiting for their turn; more are closed at once [default: half of the device-connection cap]')
            [CompletionResult]::new('--max-device-connections', '--max-device-connections', [CompletionResultType]::ParameterName, 'Device-side connections in total (also kept 256 below the open-file limit, for the host listener)')
            [CompletionResult]::new('--upstream', '--upstream', [CompletionResultType]::ParameterName, 'Relay every device to this voice backend (wss://api.tenclass.net/xiaozhi/v1/, or a self-hosted xiaozhi-esp32-server): the hub opens it with the device''s own headers and passes every frame both ways, while the CLI and MCP hosts still list and call the device''s tools. Per-device upstreams: `[upstreams]` in mcpdev.toml')
            [CompletionResult]::new('--upstream-ota', '--upstream-ota', [CompletionResultType]::ParameterName, 'Pass OTA check-ins and /activate to this upstream OTA endpoint (https://api.tenclass.net/xiaozhi/ota/); its answer comes back with websocket.url pointing at this hub and any mqtt block replaced by websocket')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--approve-all', '--approve-all', [CompletionResultType]::ParameterName, 'Admit every device (a lab bench). By default a device is admitted once approved with `mcpdev devices approve`, and must present its own token')
            [CompletionResult]::new('--mcp-user-tools', '--mcp-user-tools', [CompletionResultType]::ParameterName, 'Also offer tools the device marks user-only to MCP hosts')
            [CompletionResult]::new('--mqtt-dynsec', '--mqtt-dynsec', [CompletionResultType]::ParameterName, 'Mosquitto with dynamic security: keep a broker login per approved device (username and client id its key, password its token, its own two topics only); removed on revocation. Admin login in MCPDEV_MQTT_ADMIN_USERNAME and MCPDEV_MQTT_ADMIN_PASSWORD(_FILE), else the hub''s own')
            [CompletionResult]::new('--mqtt-shared-device-login', '--mqtt-shared-device-login', [CompletionResultType]::ParameterName, 'Hand approved devices the one login in MCPDEV_MQTT_DEVICE_USERNAME/PASSWORD. It lets every device (and anyone who reads it off one) connect under any client id, another device''s included: prefer --mqtt-dynsec or --mqtt-hooks')
            [CompletionResult]::new('--host-tls', '--host-tls', [CompletionResultType]::ParameterName, 'Serve the host listener (CLI, MCP hosts, dashboard) over https:// too, for use from other machines (with --host-addr or --allowed-host, and MCPDEV_MCP_TOKEN)')
            [CompletionResult]::new('--mqtt-plain', '--mqtt-plain', [CompletionResultType]::ParameterName, 'With TLS and --mqtt embedded: keep plain MQTT on --mqtt-listen too (by default it is moved to a loopback port for the hub''s own link)')
            [CompletionResult]::new('--upstream-plain', '--upstream-plain', [CompletionResultType]::ParameterName, 'Allow plain ws:// and http:// upstreams (the device''s token then crosses the network in clear text); by default only wss:// and https://, verified by the system''s roots or MCPDEV_CA_FILE')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;dashboard' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--no-open', '--no-open', [CompletionResultType]::ParameterName, 'Only print the link; do not open a browser')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;hello' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected')
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit')
            [CompletionResult]::new('--mqtt', '--mqtt', [CompletionResultType]::ParameterName, 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the device')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;init' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected')
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit')
            [CompletionResult]::new('--mqtt', '--mqtt', [CompletionResultType]::ParameterName, 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the device')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--vision-url', '--vision-url', [CompletionResultType]::ParameterName, 'Vision endpoint to give the device (`capabilities.vision.url`); sends a fresh initialize')
            [CompletionResult]::new('--vision-token', '--vision-token', [CompletionResultType]::ParameterName, 'Token for the vision endpoint (prefer the environment variable)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--live', '--live', [CompletionResultType]::ParameterName, 'Through a hub: send a new `initialize` instead of showing the onboarding answer (without --vision-url it carries no vision capability, so the device keeps the hub''s endpoint)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;tools' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Every tool, all pages, as a table (full schemas with --json)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;tools;list' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected')
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit')
            [CompletionResult]::new('--mqtt', '--mqtt', [CompletionResultType]::ParameterName, 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the device')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--user-tools', '--user-tools', [CompletionResultType]::ParameterName, 'Also show user-only tools (annotated audience: ["user"])')
            [CompletionResult]::new('--refresh', '--refresh', [CompletionResultType]::ParameterName, 'List the tools on the device again instead of showing the hub''s cached list (after a failed onboarding: onboard the device again)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;tools;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Every tool, all pages, as a table (full schemas with --json)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;tools;help;list' {
            break
        }
        'mcpdev;tools;help;help' {
            break
        }
        'mcpdev;call' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--args-json', '--args-json', [CompletionResultType]::ParameterName, 'Arguments as one JSON object (k=v words are merged on top)')
            [CompletionResult]::new('--save-images', '--save-images', [CompletionResultType]::ParameterName, 'Save image and audio content to DIR instead of summarising it')
            [CompletionResult]::new('--task-ttl', '--task-ttl', [CompletionResultType]::ParameterName, 'With --task: how long the server should keep the task and its result (its `ttl`)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected')
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit')
            [CompletionResult]::new('--mqtt', '--mqtt', [CompletionResultType]::ParameterName, 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the device')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--no-validate', '--no-validate', [CompletionResultType]::ParameterName, 'Send even if the arguments fail the inputSchema (the device decides)')
            [CompletionResult]::new('--task', '--task', [CompletionResultType]::ParameterName, 'With --url or --stdio: run the call as a task (MCP 2025-11-25): its status is shown on stderr while it runs, its result fetched when it ends, and Ctrl-C cancels it (`tasks/cancel`). --timeout bounds the whole wait; a task still running then is left to run (`mcpdev tasks result ID` fetches it later). A tool whose taskSupport is "required" runs as a task without it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;resources' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Every resource, all pages, as a table (as the server sent them with --json)')
            [CompletionResult]::new('read', 'read', [CompletionResultType]::ParameterValue, 'Read one resource by URI: text printed (escaped for the terminal), binary saved with --out')
            [CompletionResult]::new('templates', 'templates', [CompletionResultType]::ParameterValue, 'Every resource template (URIs with {placeholders})')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;resources;list' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the server')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;resources;read' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--out', '--out', [CompletionResultType]::ParameterName, 'Write the contents (text as UTF-8, blobs decoded) to FILE instead of the terminal')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the server')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;resources;templates' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the server')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;resources;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Every resource, all pages, as a table (as the server sent them with --json)')
            [CompletionResult]::new('read', 'read', [CompletionResultType]::ParameterValue, 'Read one resource by URI: text printed (escaped for the terminal), binary saved with --out')
            [CompletionResult]::new('templates', 'templates', [CompletionResultType]::ParameterValue, 'Every resource template (URIs with {placeholders})')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;resources;help;list' {
            break
        }
        'mcpdev;resources;help;read' {
            break
        }
        'mcpdev;resources;help;templates' {
            break
        }
        'mcpdev;resources;help;help' {
            break
        }
        'mcpdev;prompts' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Every prompt, all pages, with its arguments')
            [CompletionResult]::new('get', 'get', [CompletionResultType]::ParameterValue, 'Get a prompt''s messages: arguments given as name=value, checked against the prompt''s declared arguments before anything is sent')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;prompts;list' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the server')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;prompts;get' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--args-json', '--args-json', [CompletionResultType]::ParameterName, 'Arguments as one JSON object of strings (name=value words are merged on top)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the server')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;prompts;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'Every prompt, all pages, with its arguments')
            [CompletionResult]::new('get', 'get', [CompletionResultType]::ParameterValue, 'Get a prompt''s messages: arguments given as name=value, checked against the prompt''s declared arguments before anything is sent')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;prompts;help;list' {
            break
        }
        'mcpdev;prompts;help;get' {
            break
        }
        'mcpdev;prompts;help;help' {
            break
        }
        'mcpdev;tasks' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'The tasks the server keeps for this session (all pages)')
            [CompletionResult]::new('get', 'get', [CompletionResultType]::ParameterValue, 'One task''s status')
            [CompletionResult]::new('result', 'result', [CompletionResultType]::ParameterValue, 'A task''s result: waits (up to --timeout) for it to finish, then shows it as `call` does')
            [CompletionResult]::new('cancel', 'cancel', [CompletionResultType]::ParameterValue, 'Cancel a task')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;tasks;list' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the server')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;tasks;get' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the server')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;tasks;result' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the server')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;tasks;cancel' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)')
            [CompletionResult]::new('--stdio', '--stdio', [CompletionResultType]::ParameterName, 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]')
            [CompletionResult]::new('--stdio-env', '--stdio-env', [CompletionResultType]::ParameterName, 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable')
            [CompletionResult]::new('-H', '-H ', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'With --url: an HTTP header `Name: value` for every request; repeatable')
            [CompletionResult]::new('--transport', '--transport', [CompletionResultType]::ParameterName, 'With --url: the transport (auto picks SSE for URLs ending in /sse)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the server')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;tasks;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'The tasks the server keeps for this session (all pages)')
            [CompletionResult]::new('get', 'get', [CompletionResultType]::ParameterValue, 'One task''s status')
            [CompletionResult]::new('result', 'result', [CompletionResultType]::ParameterValue, 'A task''s result: waits (up to --timeout) for it to finish, then shows it as `call` does')
            [CompletionResult]::new('cancel', 'cancel', [CompletionResultType]::ParameterValue, 'Cancel a task')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;tasks;help;list' {
            break
        }
        'mcpdev;tasks;help;get' {
            break
        }
        'mcpdev;tasks;help;result' {
            break
        }
        'mcpdev;tasks;help;cancel' {
            break
        }
        'mcpdev;tasks;help;help' {
            break
        }
        'mcpdev;watch' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'Only this device (id, prefix or alias); all devices when left out')
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'Only this device (id, prefix or alias); all devices when left out')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('--count', '--count', [CompletionResultType]::ParameterName, 'Stop after this many events')
            [CompletionResult]::new('--record', '--record', [CompletionResultType]::ParameterName, 'Also write the device''s session to FILE (NDJSON: identity and hello, then every MCP frame both ways with timestamps; never a token), for `sim --replay FILE`; needs --device')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--traffic', '--traffic', [CompletionResultType]::ParameterName, 'Also show every MCP frame in both directions, with the round-trip latency of replies')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;devices' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('--page-size', '--page-size', [CompletionResultType]::ParameterName, 'Devices per request to the hub when listing (at most 1000)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--ndjson', '--ndjson', [CompletionResultType]::ParameterName, 'The listing as NDJSON: one device object per line, written as the hub''s pages arrive (--json keeps one array)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('approve', 'approve', [CompletionResultType]::ParameterValue, 'Admit a device: the 6-digit code it shows (or that its refusal named); or its Device-Id, which prints a token for you to give the device (never handed out over OTA)')
            [CompletionResult]::new('deny', 'deny', [CompletionResultType]::ParameterValue, 'Refuse a pending request by its code (the device may ask again, with a new code)')
            [CompletionResult]::new('revoke', 'revoke', [CompletionResultType]::ParameterValue, 'Withdraw a device''s admission and disconnect it')
            [CompletionResult]::new('pending', 'pending', [CompletionResultType]::ParameterValue, 'Devices waiting to be admitted, with their codes')
            [CompletionResult]::new('admitted', 'admitted', [CompletionResultType]::ParameterValue, 'Devices that are admitted')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;devices;approve' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--rebind', '--rebind', [CompletionResultType]::ParameterName, 'Replace the binding of a device that is admitted already (a new board or a reset one with the same MAC): the old binding''s tokens stop working and its session is cut off')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;devices;deny' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;devices;revoke' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;devices;pending' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;devices;admitted' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;devices;help' {
            [CompletionResult]::new('approve', 'approve', [CompletionResultType]::ParameterValue, 'Admit a device: the 6-digit code it shows (or that its refusal named); or its Device-Id, which prints a token for you to give the device (never handed out over OTA)')
            [CompletionResult]::new('deny', 'deny', [CompletionResultType]::ParameterValue, 'Refuse a pending request by its code (the device may ask again, with a new code)')
            [CompletionResult]::new('revoke', 'revoke', [CompletionResultType]::ParameterValue, 'Withdraw a device''s admission and disconnect it')
            [CompletionResult]::new('pending', 'pending', [CompletionResultType]::ParameterValue, 'Devices waiting to be admitted, with their codes')
            [CompletionResult]::new('admitted', 'admitted', [CompletionResultType]::ParameterValue, 'Devices that are admitted')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;devices;help;approve' {
            break
        }
        'mcpdev;devices;help;deny' {
            break
        }
        'mcpdev;devices;help;revoke' {
            break
        }
        'mcpdev;devices;help;pending' {
            break
        }
        'mcpdev;devices;help;admitted' {
            break
        }
        'mcpdev;devices;help;help' {
            break
        }
        'mcpdev;sim' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--url', '--url', [CompletionResultType]::ParameterName, 'The backend''s WebSocket URL [default: ws://127.0.0.1:PORT/xiaozhi/v1/, PORT from MCPDEV_DEVICE_ADDR as `serve` reads it, else 8000]')
            [CompletionResult]::new('--device-id', '--device-id', [CompletionResultType]::ParameterName, 'Device-Id (MAC) of the first device; further devices count up from it [default: 02:00:00:00:00:01, or the next free one: another `sim` here, or a device the hub has (`serve --demo`''s), moves it on; the id taken is printed]. With --replay: replay under this id (with a Client-Id of its own), beside the recorded device, instead of as it')
            [CompletionResult]::new('--count', '--count', [CompletionResultType]::ParameterName, 'How many virtual devices to run in this process (one the backend refuses ends alone, reported; the others run on)')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'Device token, sent as `Authorization: Bearer <token>` (prefer the environment variable)')
            [CompletionResult]::new('--extra-tools', '--extra-tools', [CompletionResultType]::ParameterName, 'Extra generated tools per device, to exercise paging')
            [CompletionResult]::new('--protocol-version', '--protocol-version', [CompletionResultType]::ParameterName, 'Binary protocol version announced in `Protocol-Version` and the hello')
            [CompletionResult]::new('--profile', '--profile', [CompletionResultType]::ParameterName, 'Which tools the virtual devices offer')
            [CompletionResult]::new('--source-addr', '--source-addr', [CompletionResultType]::ParameterName, 'Connect from these local addresses, the devices spread over them in turn (e.g. 127.0.0.2,127.0.0.3): one source address reaches a hub through about 28,000 ports at most')
            [CompletionResult]::new('--mqtt', '--mqtt', [CompletionResultType]::ParameterName, 'Connect over MQTT through this broker instead of WebSocket (mqtt://host:1883)')
            [CompletionResult]::new('--ota', '--ota', [CompletionResultType]::ParameterName, 'Bootstrap like a stock device: POST the system info to this OTA URL, then connect over what the answer says (MQTT if it has an mqtt section, else WebSocket)')
            [CompletionResult]::new('--replay', '--replay', [CompletionResultType]::ParameterName, 'Play back a session recorded with `watch --record FILE`: one device with the recorded identity and hello, answering each request with the recorded reply (--count, --extra-tools, --profile, --protocol-version, --mqtt, --ota and --source-addr do not apply to it and are refused)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--replay-timing', '--replay-timing', [CompletionResultType]::ParameterName, 'With --replay: answer after the recorded latencies')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;check' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'Listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, check it, exit (every check); without it or --mqtt, the device is reached through the hub (checks needing raw frames are skipped)')
            [CompletionResult]::new('--mqtt', '--mqtt', [CompletionResultType]::ParameterName, 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883, and run every check but the hello checks (an idle device says no hello over MQTT)')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'The Device-Id (MAC); through a hub also a unique prefix of it, or an alias')
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'The Device-Id (MAC); through a hub also a unique prefix of it, or an alias')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait up to DURATION for the device to connect (and, through a hub, finish onboarding; over MQTT, answer initialize: at least --timeout); default: 1h with --listen, not at all through a hub')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for each answer from the device')
            [CompletionResult]::new('--call', '--call', [CompletionResultType]::ParameterName, 'Call the tools matching GLOB (`*`, `?`) with arguments from their schemas; repeatable. User-only and reboot/reset/upgrade/erase tools are called only when named exactly')
            [CompletionResult]::new('--fuzz', '--fuzz', [CompletionResultType]::ParameterName, 'Also send N generated argument sets to each tool chosen with --call (bounds and just outside, wrong types, missing arguments, long and non-ASCII strings)')
            [CompletionResult]::new('--max-onboarding', '--max-onboarding', [CompletionResultType]::ParameterName, 'Onboarding (initialize and every tools/list page) must end within DURATION of the hello')
            [CompletionResult]::new('--junit', '--junit', [CompletionResultType]::ParameterName, 'Also write the results as JUnit XML to FILE')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--strict', '--strict', [CompletionResultType]::ParameterName, 'Treat warnings as failures')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;flash' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('-c', '-c', [CompletionResultType]::ParameterName, 'The chip to build for (the connected chip is checked against it)')
            [CompletionResult]::new('--chip', '--chip', [CompletionResultType]::ParameterName, 'The chip to build for (the connected chip is checked against it)')
            [CompletionResult]::new('-p', '-p', [CompletionResultType]::ParameterName, 'Serial port of the board (default: the one USB-serial port that looks like an ESP board)')
            [CompletionResult]::new('--port', '--port', [CompletionResultType]::ParameterName, 'Serial port of the board (default: the one USB-serial port that looks like an ESP board)')
            [CompletionResult]::new('-B', '-B ', [CompletionResultType]::ParameterName, 'Baud rate for flashing (connecting always starts at 115200)')
            [CompletionResult]::new('--baud', '--baud', [CompletionResultType]::ParameterName, 'Baud rate for flashing (connecting always starts at 115200)')
            [CompletionResult]::new('--save-image', '--save-image', [CompletionResultType]::ParameterName, 'Write the image to FILE instead of flashing (no hardware needed)')
            [CompletionResult]::new('--image', '--image', [CompletionResultType]::ParameterName, 'Flash this prebuilt merged image at 0x0 instead of building (e.g. the stock xiaozhi firmware)')
            [CompletionResult]::new('--flash-args', '--flash-args', [CompletionResultType]::ParameterName, 'Flash a prebuilt ESP-IDF build from its `build/flash_args` (offsets and files)')
            [CompletionResult]::new('--wifi-ssid', '--wifi-ssid', [CompletionResultType]::ParameterName, 'Wi-Fi network the device joins')
            [CompletionResult]::new('--hub-url', '--hub-url', [CompletionResultType]::ParameterName, 'Hub URL: ws://HOST:PORT/xiaozhi/v1/, mqtt://BROKER[:PORT] or http://HOST:PORT/xiaozhi/ota/, or their TLS forms wss://, mqtts://, https:// with a hub CA (default: ws://<LAN address>:8000/xiaozhi/v1/, wss:// with a hub CA)')
            [CompletionResult]::new('--hub-ca', '--hub-ca', [CompletionResultType]::ParameterName, 'The hub''s CA certificate (PEM or DER) for the record: the device then talks to its hub only over TLS (wss://, https://, mqtts://), verified against it [default: the CA of `mcpdev serve --tls auto` on this machine, <state dir>/tls/ca.pem, when it exists]')
            [CompletionResult]::new('--wait-device', '--wait-device', [CompletionResultType]::ParameterName, 'After flashing, wait up to DURATION (60s without a value) for the device to connect to the hub and print its hello')
            [CompletionResult]::new('--monitor-baud', '--monitor-baud', [CompletionResultType]::ParameterName, 'Baud rate of the serial log for --monitor')
            [CompletionResult]::new('--hub', '--hub', [CompletionResultType]::ParameterName, 'The hub''s host listener, for --wait-device')
            [CompletionResult]::new('--firmware-dir', '--firmware-dir', [CompletionResultType]::ParameterName, 'The firmware workspace to build (default: the `firmware/` next to mcpdev''s sources)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--no-verify', '--no-verify', [CompletionResultType]::ParameterName, 'Do not read the flash back to verify what was written')
            [CompletionResult]::new('--merge', '--merge', [CompletionResultType]::ParameterName, 'With --save-image: one file for offset 0 (bootloader, partition table, provisioning record, app) instead of the app alone')
            [CompletionResult]::new('--no-hub-ca', '--no-hub-ca', [CompletionResultType]::ParameterName, 'Provision no hub CA even when this machine''s hub has one: the link stays plain text')
            [CompletionResult]::new('--no-provision', '--no-provision', [CompletionResultType]::ParameterName, 'Do not write the provisioning record (keep the one on the device; app-only images never have one)')
            [CompletionResult]::new('-M', '-M ', [CompletionResultType]::ParameterName, 'After flashing, show the device''s serial log until Ctrl-C (reopening the port when a USB-Serial-JTAG board comes back after its reset); NDJSON lines with --json')
            [CompletionResult]::new('--monitor', '--monitor', [CompletionResultType]::ParameterName, 'After flashing, show the device''s serial log until Ctrl-C (reopening the port when a USB-Serial-JTAG board comes back after its reset); NDJSON lines with --json')
            [CompletionResult]::new('--monitor-only', '--monitor-only', [CompletionResultType]::ParameterName, 'Only show the serial log of the board (no build, no flashing) until Ctrl-C')
            [CompletionResult]::new('--board-info', '--board-info', [CompletionResultType]::ParameterName, 'Only tell what board is on the port (chip, revision, crystal, flash size, features, MAC)')
            [CompletionResult]::new('--erase', '--erase', [CompletionResultType]::ParameterName, 'Erase the whole flash before writing (the provisioning record and any old data go too)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;remote-token' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('create', 'create', [CompletionResultType]::ParameterValue, 'Make a token for NAME and print it (once: only its hash is kept, in the state directory), with the hub''s CA on a second line when the hub has one: the CLI then sends the token only to a hub that proves that CA')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'The tokens this hub accepts: names, ids and when they were made (never a secret)')
            [CompletionResult]::new('revoke', 'revoke', [CompletionResultType]::ParameterValue, 'Withdraw NAME''s token: the hub refuses it from now on and ends, within a second, every stream, session, connection and task it opened')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;remote-token;create' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--out', '--out', [CompletionResultType]::ParameterName, 'Write the token to FILE, readable by you only (0600), instead of printing it')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;remote-token;list' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;remote-token;revoke' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;remote-token;help' {
            [CompletionResult]::new('create', 'create', [CompletionResultType]::ParameterValue, 'Make a token for NAME and print it (once: only its hash is kept, in the state directory), with the hub''s CA on a second line when the hub has one: the CLI then sends the token only to a hub that proves that CA')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'The tokens this hub accepts: names, ids and when they were made (never a secret)')
            [CompletionResult]::new('revoke', 'revoke', [CompletionResultType]::ParameterValue, 'Withdraw NAME''s token: the hub refuses it from now on and ends, within a second, every stream, session, connection and task it opened')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;remote-token;help;create' {
            break
        }
        'mcpdev;remote-token;help;list' {
            break
        }
        'mcpdev;remote-token;help;revoke' {
            break
        }
        'mcpdev;remote-token;help;help' {
            break
        }
        'mcpdev;man' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;completions' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour (NO_COLOR is honoured under auto)')
            [CompletionResult]::new('--ca-file', '--ca-file', [CompletionResultType]::ParameterName, 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own')
            [CompletionResult]::new('--ca-fingerprint', '--ca-fingerprint', [CompletionResultType]::ParameterName, 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Machine-readable output: one JSON document, or NDJSON for streams')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only results (no progress or hints)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'mcpdev;help' {
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Run the hub: devices connect here; the CLI and MCP hosts reach them through it')
            [CompletionResult]::new('dashboard', 'dashboard', [CompletionResultType]::ParameterValue, 'Print a fresh one-time log-in link to the hub''s dashboard (and open it in a browser where one is available)')
            [CompletionResult]::new('hello', 'hello', [CompletionResultType]::ParameterValue, 'Show a device''s hello: identity, transport, features, audio parameters')
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Show the device''s MCP `initialize` answer: protocol version, serverInfo, capabilities (through a hub: the answer to the hub''s initialize at onboarding; --live sends a new one)')
            [CompletionResult]::new('tools', 'tools', [CompletionResultType]::ParameterValue, 'List a device''s tools')
            [CompletionResult]::new('call', 'call', [CompletionResultType]::ParameterValue, 'Call a tool: arguments typed and validated by its inputSchema before anything is sent')
            [CompletionResult]::new('resources', 'resources', [CompletionResultType]::ParameterValue, 'An MCP server''s resources: list, read, templates (--url or --stdio)')
            [CompletionResult]::new('prompts', 'prompts', [CompletionResultType]::ParameterValue, 'An MCP server''s prompts: list, get with typed arguments (--url or --stdio)')
            [CompletionResult]::new('tasks', 'tasks', [CompletionResultType]::ParameterValue, 'The tasks an MCP server keeps (MCP 2025-11-25): list, get, result, cancel (--url or --stdio)')
            [CompletionResult]::new('watch', 'watch', [CompletionResultType]::ParameterValue, 'Stream live events: connects, hellos, notifications, messages, and MCP traffic')
            [CompletionResult]::new('devices', 'devices', [CompletionResultType]::ParameterValue, 'List connected devices; approve, revoke and list devices waiting to be admitted')
            [CompletionResult]::new('sim', 'sim', [CompletionResultType]::ParameterValue, 'Run virtual devices (the firmware''s own MCP core) against a backend')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Check a device''s firmware: conformance and robustness, each check pass/warn/fail')
            [CompletionResult]::new('flash', 'flash', [CompletionResultType]::ParameterValue, 'Build the firmware, make the image, flash and provision an ESP32-C3/C6 (or save the image)')
            [CompletionResult]::new('remote-token', 'remote-token', [CompletionResultType]::ParameterValue, 'Tokens for people who use this machine''s hub from another machine (run it on the hub''s machine)')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page of mcpdev or of a command (`mcpdev man call | man -l -`)')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print the shell completion script (`mcpdev completions bash > ~/.local/share/bash-completion/completions/mcpdev`)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpdev;help;serve' {
            break
        }
        'mcpdev;help;dashboard' {
            break
        }
        'mcpdev;help;hello' {
            break
        }
        'mcpdev;help;init' {
            break
        }
        'mcpdev;help;tools' {
            break
        }
        'mcpdev;help;call' {
            break
        }
        'mcpdev;help;resources' {
            break
        }
        'mcpdev;help;prompts' {
            break
        }
        'mcpdev;help;tasks' {
            break
        }
        'mcpdev;help;watch' {
            break
        }
        'mcpdev;help;devices' {
            break
        }
        'mcpdev;help;sim' {
            break
        }
        'mcpdev;help;check' {
            break
        }
        'mcpdev;help;flash' {
            break
        }
        'mcpdev;help;remote-token' {
            break
        }
        'mcpdev;help;man' {
            break
        }
        'mcpdev;help;completions' {
            break
        }
        'mcpdev;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
