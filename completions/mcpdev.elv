
use builtin;
use str;

set edit:completion:arg-completer[mcpdev] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'mcpdev'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'mcpdev'= {
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand serve 'Run the hub: devices connect here; the CLI and MCP hosts reach them through it'
            cand dashboard 'Print a fresh one-time log-in link to the hub''s dashboard (and open it in a browser where one is available)'
            cand hello 'Show a device''s hello: identity, transport, features, audio parameters'
            cand init 'Show the device''s MCP `initialize` answer: protocol version, serverInfo, capabilities (through a hub: the answer to the hub''s initialize at onboarding; --live sends a new one)'
            cand tools 'List a device''s tools'
            cand call 'Call a tool: arguments typed and validated by its inputSchema before anything is sent'
            cand resources 'An MCP server''s resources: list, read, templates (--url or --stdio)'
            cand prompts 'An MCP server''s prompts: list, get with typed arguments (--url or --stdio)'
            cand tasks 'The tasks an MCP server keeps (MCP 2025-11-25): list, get, result, cancel (--url or --stdio)'
            cand watch 'Stream live events: connects, hellos, notifications, messages, and MCP traffic'
            cand devices 'List connected devices; approve, revoke and list devices waiting to be admitted'
            cand sim 'Run virtual devices (the firmware''s own MCP core) against a backend'
            cand check 'Check a device''s firmware: conformance and robustness, each check pass/warn/fail'
            cand flash 'Build the firmware, make the image, flash and provision an ESP32-C3/C6 (or save the image)'
            cand remote-token 'Tokens for people who use this machine''s hub from another machine (run it on the hub''s machine)'
            cand man 'Print the man page of mcpdev or of a command (`mcpdev man call | man -l -`)'
            cand completions 'Print the shell completion script (`mcpdev completions bash > ~/.local/share/bash-completion/completions/mcpdev`)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;serve'= {
            cand --device-addr 'Where devices connect (WebSocket /xiaozhi/v1/)'
            cand --host-addr 'Where the CLI and MCP hosts connect; keep it on loopback unless you add --allowed-host'
            cand --ready-file 'Once every listener is up, write the `listening` event (JSON: the real addresses) to FILE, so a script can wait for it; removed when the hub stops'
            cand --demo 'Run N virtual devices in this process (2 when given without a number)'
            cand --demo-extra-tools 'Extra generated tools per demo device'
            cand --demo-profile 'Which tools the demo devices offer'
            cand --device-token 'Shared device tokens, comma-separated, accepted for any Device-Id (not bound to a device; prefer per-device admission)'
            cand --gateway-token 'Gateway credentials, comma-separated (the xiaozhi MQTT gateway sends one bearer token for every device): accepted in place of the device token of Device-Ids a person approved; the others wait in `mcpdev devices pending`'
            cand --vision-url 'capabilities.vision.url for initialize (default: the hub''s own vision endpoint)'
            cand --vision-token 'capabilities.vision.token for --vision-url (default: each device gets its own token for the hub''s own endpoint)'
            cand --vision-dir 'Where the hub''s vision endpoint saves uploaded photos, private to this user (folder 0700, files 0600) [default: vision/ in the state directory]'
            cand --vision-max-files 'Photos the vision folder keeps (the oldest are removed first)'
            cand --vision-max-mb 'Megabytes the vision folder keeps (the oldest photos are removed first)'
            cand --keepalive 'Send an MCP ping to a device after this long without traffic (its limit is 120 s)'
            cand --onboarding-timeout 'Timeout of each onboarding request (initialize, tools/list)'
            cand --allowed-host 'Also accept this Host name on the host listener (for LAN use); repeatable'
            cand --allowed-origin 'Also accept requests with this Origin on the host listener; repeatable'
            cand --mcp-token 'A bearer token MCP clients must send to /mcp, /devices/*/mcp and /sse (prefer the environment variable); shared by its holders, read once at start. Under --host-tls each person''s remote token opens these too, and this one is optional'
            cand --mcp-timeout 'How long an MCP tools/call waits for the device'
            cand --mcp-names 'Tool names on /mcp: prefixed by device (`<alias>.<tool>`, stable) or the devices'' own'
            cand --mcp-page-size 'Tools per tools/list page on the MCP endpoints'
            cand --mcp-fleet-threshold 'Devices connected above which /mcp and /sse offer fleet tools (search_devices, list_device_tools, call_device_tool) instead of every device''s tools; they turn back at a quarter below. /devices/<id>/mcp always offers that device''s own tools'
            cand --mcp-max-sessions 'Open MCP sessions (/mcp, /sse, /devices/*/mcp and /sse) allowed in total; a new one beyond it takes the place of the least recently used Streamable HTTP session idle for --mcp-reclaim-idle, or is refused with 503 until sessions end or expire (5 min idle)'
            cand --mcp-max-sessions-per-peer 'Open MCP sessions allowed from one peer address (on loopback, every local MCP host is one peer), and for one person''s remote token from any address'
            cand --mcp-reclaim-idle 'How long a Streamable HTTP session must go without a request (and with none open) before a new session may take its place when a session cap is full'
            cand --mcp-max-tasks 'MCP tasks (a tools/call with params.task) the hub holds at once, running or finished; a task is kept for its ttl (at most 1 h), then forgotten'
            cand --mcp-max-tasks-per-session 'MCP tasks one session may hold at once'
            cand --mqtt 'Serve MQTT devices: `embedded` runs a broker in this process; or a broker URL (mqtt://[user@]host[:port], mqtts://…; a password in MCPDEV_MQTT_PASSWORD)'
            cand --mqtt-listen 'Where the embedded broker listens'
            cand --mqtt-group 'Shared-subscription group: hubs on one broker with the same group and the same hub secret share the devices (they read `$share/NAME-<tag>/…`, the tag derived from the hub secret, so a hub with another secret takes none of their uplinks)'
            cand --hub-name 'This hub''s name in a cluster, shown by `devices` (column `hub`) instead of its id: up to 32 letters, digits, `.`, `-` and `_` (needs --mqtt: a hub without a broker has no cluster)'
            cand --cluster-index-max 'Cluster: devices this hub lists in its index for the other hubs at most (the first in Device-Id order); the others hubs find the rest on demand and say how many are not listed'
            cand --cluster-stand-ins 'Cluster: other hubs'' devices kept as stand-ins for this hub''s MCP endpoints at once; beyond it the one used least recently is dropped and made again when asked for'
            cand --cluster-link 'Cluster: offer the other hubs a direct TLS link here for their requests to this hub''s devices (one hop fewer than the broker each way): the address they reach this hub at, not a wildcard (port 0: any free port). Advertised to the hubs only, MAC''d with the hub secret; a hub without one goes through the broker'
            cand --mqtt-max-payload 'Largest MQTT message to or from a device, in bytes; larger ones are refused'
            cand --mqtt-hooks 'EMQX 5: serve its HTTP authentication and authorization hooks here (/mqtt/authn, /mqtt/authz), so that EMQX asks the hub; the secret EMQX sends is in MCPDEV_MQTT_HOOK_SECRET(_FILE)'
            cand --mqtt-device-endpoint '`mqtt.endpoint` handed to devices by OTA (default: the broker''s address as devices reach it)'
            cand --udp-addr 'The UDP socket MQTT devices send audio to (counted, then dropped)'
            cand --public-host 'The name devices reach this machine by (OTA URLs, udp.server, vision URL); default: the hub''s address the device came in on (MQTT devices: this machine''s address)'
            cand --firmware 'Offer this firmware image in OTA answers (served by the hub; needs --firmware-version)'
            cand --firmware-version 'The version of --firmware; a device upgrades when it is newer than its own'
            cand --timezone-offset '`server_time.timezone_offset` in OTA answers, in minutes east of UTC'
            cand --tls 'Serve devices over https:// and wss:// only (and mqtts with --mqtt embedded); `auto`: with the hub''s own CA (docs/tls.md)'
            cand --tls-cert 'Serve TLS with this certificate chain (PEM, leaf first: certbot''s fullchain.pem), re-read when it changes; a public certificate is what stock xiaozhi firmware accepts'
            cand --tls-key 'The private key of --tls-cert (PEM)'
            cand --mqtts-listen 'With TLS and --mqtt embedded: where the broker takes MQTT over TLS (stock firmware uses TLS on port 8883 only)'
            cand --header-timeout 'A request''s headers must arrive within this (both listeners)'
            cand --body-timeout 'A request''s body must arrive within this (both listeners)'
            cand --tls-handshake-timeout 'A TLS handshake must be complete this long after its connection was let in (it holds a pre-hello slot meanwhile)'
            cand --hello-timeout 'A WebSocket device that has not said hello this long after connecting is closed'
            cand --max-pre-hello-per-peer 'Connections from one address that have not said hello yet (more for a distant address whose hellos keep coming); more wait their turn (--accept-queue-timeout)'
            cand --max-pre-hello 'Device-side connections that have not said hello yet, in total; more wait their turn'
            cand --accept-queue-timeout 'How long a connection over those caps waits for its turn before it is closed'
            cand --max-queued-per-peer 'Connections from one address waiting for their turn; more are closed at once [default: half of the device-connection cap]'
            cand --max-device-connections 'Device-side connections in total (also kept 256 below the open-file limit, for the host listener)'
            cand --upstream 'Relay every device to this voice backend (wss://api.tenclass.net/xiaozhi/v1/, or a self-hosted xiaozhi-esp32-server): the hub opens it with the device''s own headers and passes every frame both ways, while the CLI and MCP hosts still list and call the device''s tools. Per-device upstreams: `[upstreams]` in mcpdev.toml'
            cand --upstream-ota 'Pass OTA check-ins and /activate to this upstream OTA endpoint (https://api.tenclass.net/xiaozhi/ota/); its answer comes back with websocket.url pointing at this hub and any mqtt block replaced by websocket'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --approve-all 'Admit every device (a lab bench). By default a device is admitted once approved with `mcpdev devices approve`, and must present its own token'
            cand --mcp-user-tools 'Also offer tools the device marks user-only to MCP hosts'
            cand --mqtt-dynsec 'Mosquitto with dynamic security: keep a broker login per approved device (username and client id its key, password its token, its own two topics only); removed on revocation. Admin login in MCPDEV_MQTT_ADMIN_USERNAME and MCPDEV_MQTT_ADMIN_PASSWORD(_FILE), else the hub''s own'
            cand --mqtt-shared-device-login 'Hand approved devices the one login in MCPDEV_MQTT_DEVICE_USERNAME/PASSWORD. It lets every device (and anyone who reads it off one) connect under any client id, another device''s included: prefer --mqtt-dynsec or --mqtt-hooks'
            cand --host-tls 'Serve the host listener (CLI, MCP hosts, dashboard) over https:// too, for use from other machines (with --host-addr or --allowed-host, and MCPDEV_MCP_TOKEN)'
            cand --mqtt-plain 'With TLS and --mqtt embedded: keep plain MQTT on --mqtt-listen too (by default it is moved to a loopback port for the hub''s own link)'
            cand --upstream-plain 'Allow plain ws:// and http:// upstreams (the device''s token then crosses the network in clear text); by default only wss:// and https://, verified by the system''s roots or MCPDEV_CA_FILE'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;dashboard'= {
            cand --hub 'The hub''s host listener'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --no-open 'Only print the link; do not open a browser'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;hello'= {
            cand --hub 'The hub''s host listener'
            cand -d 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected'
            cand --device 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected'
            cand --listen 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit'
            cand --mqtt 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883'
            cand --wait 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)'
            cand --timeout 'How long to wait for each answer from the device'
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;init'= {
            cand --hub 'The hub''s host listener'
            cand -d 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected'
            cand --device 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected'
            cand --listen 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit'
            cand --mqtt 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883'
            cand --wait 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)'
            cand --timeout 'How long to wait for each answer from the device'
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --vision-url 'Vision endpoint to give the device (`capabilities.vision.url`); sends a fresh initialize'
            cand --vision-token 'Token for the vision endpoint (prefer the environment variable)'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --live 'Through a hub: send a new `initialize` instead of showing the onboarding answer (without --vision-url it carries no vision capability, so the device keeps the hub''s endpoint)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;tools'= {
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand list 'Every tool, all pages, as a table (full schemas with --json)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;tools;list'= {
            cand --hub 'The hub''s host listener'
            cand -d 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected'
            cand --device 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected'
            cand --listen 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit'
            cand --mqtt 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883'
            cand --wait 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)'
            cand --timeout 'How long to wait for each answer from the device'
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --user-tools 'Also show user-only tools (annotated audience: ["user"])'
            cand --refresh 'List the tools on the device again instead of showing the hub''s cached list (after a failed onboarding: onboard the device again)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;tools;help'= {
            cand list 'Every tool, all pages, as a table (full schemas with --json)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;tools;help;list'= {
        }
        &'mcpdev;tools;help;help'= {
        }
        &'mcpdev;call'= {
            cand --args-json 'Arguments as one JSON object (k=v words are merged on top)'
            cand --save-images 'Save image and audio content to DIR instead of summarising it'
            cand --task-ttl 'With --task: how long the server should keep the task and its result (its `ttl`)'
            cand --hub 'The hub''s host listener'
            cand -d 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected'
            cand --device 'Device-Id (MAC), a unique prefix of it, or an alias; may be left out with one device connected'
            cand --listen 'Instead of a hub: listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, do the step, exit'
            cand --mqtt 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883'
            cand --wait 'Wait up to DURATION for the device to connect and finish onboarding (e.g. 30s)'
            cand --timeout 'How long to wait for each answer from the device'
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --no-validate 'Send even if the arguments fail the inputSchema (the device decides)'
            cand --task 'With --url or --stdio: run the call as a task (MCP 2025-11-25): its status is shown on stderr while it runs, its result fetched when it ends, and Ctrl-C cancels it (`tasks/cancel`). --timeout bounds the whole wait; a task still running then is left to run (`mcpdev tasks result ID` fetches it later). A tool whose taskSupport is "required" runs as a task without it'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;resources'= {
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand list 'Every resource, all pages, as a table (as the server sent them with --json)'
            cand read 'Read one resource by URI: text printed (escaped for the terminal), binary saved with --out'
            cand templates 'Every resource template (URIs with {placeholders})'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;resources;list'= {
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --timeout 'How long to wait for each answer from the server'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;resources;read'= {
            cand --out 'Write the contents (text as UTF-8, blobs decoded) to FILE instead of the terminal'
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --timeout 'How long to wait for each answer from the server'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;resources;templates'= {
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --timeout 'How long to wait for each answer from the server'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;resources;help'= {
            cand list 'Every resource, all pages, as a table (as the server sent them with --json)'
            cand read 'Read one resource by URI: text printed (escaped for the terminal), binary saved with --out'
            cand templates 'Every resource template (URIs with {placeholders})'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;resources;help;list'= {
        }
        &'mcpdev;resources;help;read'= {
        }
        &'mcpdev;resources;help;templates'= {
        }
        &'mcpdev;resources;help;help'= {
        }
        &'mcpdev;prompts'= {
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand list 'Every prompt, all pages, with its arguments'
            cand get 'Get a prompt''s messages: arguments given as name=value, checked against the prompt''s declared arguments before anything is sent'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;prompts;list'= {
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --timeout 'How long to wait for each answer from the server'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;prompts;get'= {
            cand --args-json 'Arguments as one JSON object of strings (name=value words are merged on top)'
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --timeout 'How long to wait for each answer from the server'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;prompts;help'= {
            cand list 'Every prompt, all pages, with its arguments'
            cand get 'Get a prompt''s messages: arguments given as name=value, checked against the prompt''s declared arguments before anything is sent'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;prompts;help;list'= {
        }
        &'mcpdev;prompts;help;get'= {
        }
        &'mcpdev;prompts;help;help'= {
        }
        &'mcpdev;tasks'= {
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand list 'The tasks the server keeps for this session (all pages)'
            cand get 'One task''s status'
            cand result 'A task''s result: waits (up to --timeout) for it to finish, then shows it as `call` does'
            cand cancel 'Cancel a task'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;tasks;list'= {
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --timeout 'How long to wait for each answer from the server'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;tasks;get'= {
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --timeout 'How long to wait for each answer from the server'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;tasks;result'= {
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --timeout 'How long to wait for each answer from the server'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;tasks;cancel'= {
            cand --url 'An MCP server at this URL, instead of a device (Streamable HTTP, or legacy SSE for …/sse)'
            cand --stdio 'An MCP server run as a child over stdio, instead of a device, e.g. --stdio "npx -y @modelcontextprotocol/server-everything" (words split as a shell would; no shell is run). Without a command: the one in mcpdev.toml''s [stdio]'
            cand --stdio-env 'With --stdio: NAME=VALUE in the server''s environment, or NAME to pass ours on (it gets only HOME, PATH, USER, LANG… of ours otherwise); repeatable'
            cand -H 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --header 'With --url: an HTTP header `Name: value` for every request; repeatable'
            cand --transport 'With --url: the transport (auto picks SSE for URLs ending in /sse)'
            cand --timeout 'How long to wait for each answer from the server'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;tasks;help'= {
            cand list 'The tasks the server keeps for this session (all pages)'
            cand get 'One task''s status'
            cand result 'A task''s result: waits (up to --timeout) for it to finish, then shows it as `call` does'
            cand cancel 'Cancel a task'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;tasks;help;list'= {
        }
        &'mcpdev;tasks;help;get'= {
        }
        &'mcpdev;tasks;help;result'= {
        }
        &'mcpdev;tasks;help;cancel'= {
        }
        &'mcpdev;tasks;help;help'= {
        }
        &'mcpdev;watch'= {
            cand -d 'Only this device (id, prefix or alias); all devices when left out'
            cand --device 'Only this device (id, prefix or alias); all devices when left out'
            cand --hub 'The hub''s host listener'
            cand --count 'Stop after this many events'
            cand --record 'Also write the device''s session to FILE (NDJSON: identity and hello, then every MCP frame both ways with timestamps; never a token), for `sim --replay FILE`; needs --device'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --traffic 'Also show every MCP frame in both directions, with the round-trip latency of replies'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;devices'= {
            cand --hub 'The hub''s host listener'
            cand --page-size 'Devices per request to the hub when listing (at most 1000)'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --ndjson 'The listing as NDJSON: one device object per line, written as the hub''s pages arrive (--json keeps one array)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand approve 'Admit a device: the 6-digit code it shows (or that its refusal named); or its Device-Id, which prints a token for you to give the device (never handed out over OTA)'
            cand deny 'Refuse a pending request by its code (the device may ask again, with a new code)'
            cand revoke 'Withdraw a device''s admission and disconnect it'
            cand pending 'Devices waiting to be admitted, with their codes'
            cand admitted 'Devices that are admitted'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;devices;approve'= {
            cand --hub 'The hub''s host listener'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --rebind 'Replace the binding of a device that is admitted already (a new board or a reset one with the same MAC): the old binding''s tokens stop working and its session is cut off'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;devices;deny'= {
            cand --hub 'The hub''s host listener'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;devices;revoke'= {
            cand --hub 'The hub''s host listener'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;devices;pending'= {
            cand --hub 'The hub''s host listener'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;devices;admitted'= {
            cand --hub 'The hub''s host listener'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;devices;help'= {
            cand approve 'Admit a device: the 6-digit code it shows (or that its refusal named); or its Device-Id, which prints a token for you to give the device (never handed out over OTA)'
            cand deny 'Refuse a pending request by its code (the device may ask again, with a new code)'
            cand revoke 'Withdraw a device''s admission and disconnect it'
            cand pending 'Devices waiting to be admitted, with their codes'
            cand admitted 'Devices that are admitted'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;devices;help;approve'= {
        }
        &'mcpdev;devices;help;deny'= {
        }
        &'mcpdev;devices;help;revoke'= {
        }
        &'mcpdev;devices;help;pending'= {
        }
        &'mcpdev;devices;help;admitted'= {
        }
        &'mcpdev;devices;help;help'= {
        }
        &'mcpdev;sim'= {
            cand --url 'The backend''s WebSocket URL [default: ws://127.0.0.1:PORT/xiaozhi/v1/, PORT from MCPDEV_DEVICE_ADDR as `serve` reads it, else 8000]'
            cand --device-id 'Device-Id (MAC) of the first device; further devices count up from it [default: 02:00:00:00:00:01, or the next free one: another `sim` here, or a device the hub has (`serve --demo`''s), moves it on; the id taken is printed]. With --replay: replay under this id (with a Client-Id of its own), beside the recorded device, instead of as it'
            cand --count 'How many virtual devices to run in this process (one the backend refuses ends alone, reported; the others run on)'
            cand --token 'Device token, sent as `Authorization: Bearer <token>` (prefer the environment variable)'
            cand --extra-tools 'Extra generated tools per device, to exercise paging'
            cand --protocol-version 'Binary protocol version announced in `Protocol-Version` and the hello'
            cand --profile 'Which tools the virtual devices offer'
            cand --source-addr 'Connect from these local addresses, the devices spread over them in turn (e.g. 127.0.0.2,127.0.0.3): one source address reaches a hub through about 28,000 ports at most'
            cand --mqtt 'Connect over MQTT through this broker instead of WebSocket (mqtt://host:1883)'
            cand --ota 'Bootstrap like a stock device: POST the system info to this OTA URL, then connect over what the answer says (MQTT if it has an mqtt section, else WebSocket)'
            cand --replay 'Play back a session recorded with `watch --record FILE`: one device with the recorded identity and hello, answering each request with the recorded reply (--count, --extra-tools, --profile, --protocol-version, --mqtt, --ota and --source-addr do not apply to it and are refused)'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --replay-timing 'With --replay: answer after the recorded latencies'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;check'= {
            cand --listen 'Listen on ADDR (e.g. 0.0.0.0:8000), accept the next device, check it, exit (every check); without it or --mqtt, the device is reached through the hub (checks needing raw frames are skipped)'
            cand --mqtt 'Instead of a hub: reach the device (--device) through this MQTT broker, e.g. mqtt://host:1883, and run every check but the hello checks (an idle device says no hello over MQTT)'
            cand -d 'The Device-Id (MAC); through a hub also a unique prefix of it, or an alias'
            cand --device 'The Device-Id (MAC); through a hub also a unique prefix of it, or an alias'
            cand --hub 'The hub''s host listener'
            cand --wait 'Wait up to DURATION for the device to connect (and, through a hub, finish onboarding; over MQTT, answer initialize: at least --timeout); default: 1h with --listen, not at all through a hub'
            cand --timeout 'How long to wait for each answer from the device'
            cand --call 'Call the tools matching GLOB (`*`, `?`) with arguments from their schemas; repeatable. User-only and reboot/reset/upgrade/erase tools are called only when named exactly'
            cand --fuzz 'Also send N generated argument sets to each tool chosen with --call (bounds and just outside, wrong types, missing arguments, long and non-ASCII strings)'
            cand --max-onboarding 'Onboarding (initialize and every tools/list page) must end within DURATION of the hello'
            cand --junit 'Also write the results as JUnit XML to FILE'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --strict 'Treat warnings as failures'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;flash'= {
            cand -c 'The chip to build for (the connected chip is checked against it)'
            cand --chip 'The chip to build for (the connected chip is checked against it)'
            cand -p 'Serial port of the board (default: the one USB-serial port that looks like an ESP board)'
            cand --port 'Serial port of the board (default: the one USB-serial port that looks like an ESP board)'
            cand -B 'Baud rate for flashing (connecting always starts at 115200)'
            cand --baud 'Baud rate for flashing (connecting always starts at 115200)'
            cand --save-image 'Write the image to FILE instead of flashing (no hardware needed)'
            cand --image 'Flash this prebuilt merged image at 0x0 instead of building (e.g. the stock xiaozhi firmware)'
            cand --flash-args 'Flash a prebuilt ESP-IDF build from its `build/flash_args` (offsets and files)'
            cand --wifi-ssid 'Wi-Fi network the device joins'
            cand --hub-url 'Hub URL: ws://HOST:PORT/xiaozhi/v1/, mqtt://BROKER[:PORT] or http://HOST:PORT/xiaozhi/ota/, or their TLS forms wss://, mqtts://, https:// with a hub CA (default: ws://<LAN address>:8000/xiaozhi/v1/, wss:// with a hub CA)'
            cand --hub-ca 'The hub''s CA certificate (PEM or DER) for the record: the device then talks to its hub only over TLS (wss://, https://, mqtts://), verified against it [default: the CA of `mcpdev serve --tls auto` on this machine, <state dir>/tls/ca.pem, when it exists]'
            cand --wait-device 'After flashing, wait up to DURATION (60s without a value) for the device to connect to the hub and print its hello'
            cand --monitor-baud 'Baud rate of the serial log for --monitor'
            cand --hub 'The hub''s host listener, for --wait-device'
            cand --firmware-dir 'The firmware workspace to build (default: the `firmware/` next to mcpdev''s sources)'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --no-verify 'Do not read the flash back to verify what was written'
            cand --merge 'With --save-image: one file for offset 0 (bootloader, partition table, provisioning record, app) instead of the app alone'
            cand --no-hub-ca 'Provision no hub CA even when this machine''s hub has one: the link stays plain text'
            cand --no-provision 'Do not write the provisioning record (keep the one on the device; app-only images never have one)'
            cand -M 'After flashing, show the device''s serial log until Ctrl-C (reopening the port when a USB-Serial-JTAG board comes back after its reset); NDJSON lines with --json'
            cand --monitor 'After flashing, show the device''s serial log until Ctrl-C (reopening the port when a USB-Serial-JTAG board comes back after its reset); NDJSON lines with --json'
            cand --monitor-only 'Only show the serial log of the board (no build, no flashing) until Ctrl-C'
            cand --board-info 'Only tell what board is on the port (chip, revision, crystal, flash size, features, MAC)'
            cand --erase 'Erase the whole flash before writing (the provisioning record and any old data go too)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;remote-token'= {
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand create 'Make a token for NAME and print it (once: only its hash is kept, in the state directory), with the hub''s CA on a second line when the hub has one: the CLI then sends the token only to a hub that proves that CA'
            cand list 'The tokens this hub accepts: names, ids and when they were made (never a secret)'
            cand revoke 'Withdraw NAME''s token: the hub refuses it from now on and ends, within a second, every stream, session, connection and task it opened'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;remote-token;create'= {
            cand --out 'Write the token to FILE, readable by you only (0600), instead of printing it'
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;remote-token;list'= {
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;remote-token;revoke'= {
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;remote-token;help'= {
            cand create 'Make a token for NAME and print it (once: only its hash is kept, in the state directory), with the hub''s CA on a second line when the hub has one: the CLI then sends the token only to a hub that proves that CA'
            cand list 'The tokens this hub accepts: names, ids and when they were made (never a secret)'
            cand revoke 'Withdraw NAME''s token: the hub refuses it from now on and ends, within a second, every stream, session, connection and task it opened'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;remote-token;help;create'= {
        }
        &'mcpdev;remote-token;help;list'= {
        }
        &'mcpdev;remote-token;help;revoke'= {
        }
        &'mcpdev;remote-token;help;help'= {
        }
        &'mcpdev;man'= {
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;completions'= {
            cand --color 'When to use colour (NO_COLOR is honoured under auto)'
            cand --ca-file 'Verify https:// and wss:// servers (a hub, --url, sim, mqtts brokers) against this CA certificate (PEM) instead of the system''s roots; `serve` prints where the hub keeps its own'
            cand --ca-fingerprint 'Trust only a server whose certificate, or a CA in the chain it sends, has this SHA-256 fingerprint (`serve` prints its CA''s)'
            cand --json 'Machine-readable output: one JSON document, or NDJSON for streams'
            cand -q 'Print only results (no progress or hints)'
            cand --quiet 'Print only results (no progress or hints)'
            cand -v 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'mcpdev;help'= {
            cand serve 'Run the hub: devices connect here; the CLI and MCP hosts reach them through it'
            cand dashboard 'Print a fresh one-time log-in link to the hub''s dashboard (and open it in a browser where one is available)'
            cand hello 'Show a device''s hello: identity, transport, features, audio parameters'
            cand init 'Show the device''s MCP `initialize` answer: protocol version, serverInfo, capabilities (through a hub: the answer to the hub''s initialize at onboarding; --live sends a new one)'
            cand tools 'List a device''s tools'
            cand call 'Call a tool: arguments typed and validated by its inputSchema before anything is sent'
            cand resources 'An MCP server''s resources: list, read, templates (--url or --stdio)'
            cand prompts 'An MCP server''s prompts: list, get with typed arguments (--url or --stdio)'
            cand tasks 'The tasks an MCP server keeps (MCP 2025-11-25): list, get, result, cancel (--url or --stdio)'
            cand watch 'Stream live events: connects, hellos, notifications, messages, and MCP traffic'
            cand devices 'List connected devices; approve, revoke and list devices waiting to be admitted'
            cand sim 'Run virtual devices (the firmware''s own MCP core) against a backend'
            cand check 'Check a device''s firmware: conformance and robustness, each check pass/warn/fail'
            cand flash 'Build the firmware, make the image, flash and provision an ESP32-C3/C6 (or save the image)'
            cand remote-token 'Tokens for people who use this machine''s hub from another machine (run it on the hub''s machine)'
            cand man 'Print the man page of mcpdev or of a command (`mcpdev man call | man -l -`)'
            cand completions 'Print the shell completion script (`mcpdev completions bash > ~/.local/share/bash-completion/completions/mcpdev`)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpdev;help;serve'= {
        }
        &'mcpdev;help;dashboard'= {
        }
        &'mcpdev;help;hello'= {
        }
        &'mcpdev;help;init'= {
        }
        &'mcpdev;help;tools'= {
            cand list 'Every tool, all pages, as a table (full schemas with --json)'
        }
        &'mcpdev;help;tools;list'= {
        }
        &'mcpdev;help;call'= {
        }
        &'mcpdev;help;resources'= {
            cand list 'Every resource, all pages, as a table (as the server sent them with --json)'
            cand read 'Read one resource by URI: text printed (escaped for the terminal), binary saved with --out'
            cand templates 'Every resource template (URIs with {placeholders})'
        }
        &'mcpdev;help;resources;list'= {
        }
        &'mcpdev;help;resources;read'= {
        }
        &'mcpdev;help;resources;templates'= {
        }
        &'mcpdev;help;prompts'= {
            cand list 'Every prompt, all pages, with its arguments'
            cand get 'Get a prompt''s messages: arguments given as name=value, checked against the prompt''s declared arguments before anything is sent'
        }
        &'mcpdev;help;prompts;list'= {
        }
        &'mcpdev;help;prompts;get'= {
        }
        &'mcpdev;help;tasks'= {
            cand list 'The tasks the server keeps for this session (all pages)'
            cand get 'One task''s status'
            cand result 'A task''s result: waits (up to --timeout) for it to finish, then shows it as `call` does'
            cand cancel 'Cancel a task'
        }
        &'mcpdev;help;tasks;list'= {
        }
        &'mcpdev;help;tasks;get'= {
        }
        &'mcpdev;help;tasks;result'= {
        }
        &'mcpdev;help;tasks;cancel'= {
        }
        &'mcpdev;help;watch'= {
        }
        &'mcpdev;help;devices'= {
            cand approve 'Admit a device: the 6-digit code it shows (or that its refusal named); or its Device-Id, which prints a token for you to give the device (never handed out over OTA)'
            cand deny 'Refuse a pending request by its code (the device may ask again, with a new code)'
            cand revoke 'Withdraw a device''s admission and disconnect it'
            cand pending 'Devices waiting to be admitted, with their codes'
            cand admitted 'Devices that are admitted'
        }
        &'mcpdev;help;devices;approve'= {
        }
        &'mcpdev;help;devices;deny'= {
        }
        &'mcpdev;help;devices;revoke'= {
        }
        &'mcpdev;help;devices;pending'= {
        }
        &'mcpdev;help;devices;admitted'= {
        }
        &'mcpdev;help;sim'= {
        }
        &'mcpdev;help;check'= {
        }
        &'mcpdev;help;flash'= {
        }
        &'mcpdev;help;remote-token'= {
            cand create 'Make a token for NAME and print it (once: only its hash is kept, in the state directory), with the hub''s CA on a second line when the hub has one: the CLI then sends the token only to a hub that proves that CA'
            cand list 'The tokens this hub accepts: names, ids and when they were made (never a secret)'
            cand revoke 'Withdraw NAME''s token: the hub refuses it from now on and ends, within a second, every stream, session, connection and task it opened'
        }
        &'mcpdev;help;remote-token;create'= {
        }
        &'mcpdev;help;remote-token;list'= {
        }
        &'mcpdev;help;remote-token;revoke'= {
        }
        &'mcpdev;help;man'= {
        }
        &'mcpdev;help;completions'= {
        }
        &'mcpdev;help;help'= {
        }
    ]
    $completions[$command]
}
