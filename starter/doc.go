// Command flotilla is the Flotilla CLI: it talks to the Temporal cluster that
// runs Flotilla's workflows (by default the dev server that
// `flotilla-worker --dev` starts on 127.0.0.1:7233).
//
// Global flags: --temporal-address, --namespace, the TLS and API-key options,
// and -o/--output table|yaml|json for every command that prints objects.
// Every flag can also be set as FLOTILLA_<FLAG> in the environment.
// `flotilla completion bash|zsh|fish|powershell` prints shell completion.
package main
